"""``manage.py eval_gate DATASET --chain SLUG --candidate LABEL --baseline LABEL [--margin X]
[--repeats N] [--chat-options JSON] [--max-regressions N] [--min-delta X]
[--evaluator KEY[:JSON]]... [--no-reuse] [--guard-dataset FILE [--guard-margin X]] [--json]``.

Evaluates the versions the two labels point at on the dataset (reusing finished runs of those
versions with the same evaluators, repeats and pinned chat options when the dataset did not
change since; ``--no-reuse`` runs both afresh), compares them
(:mod:`advisors_app.evaluation.gate`) and prints, per score key, the mean difference and its
95 % interval against ``-margin``. **Exit status**: 0 when the candidate is no worse — every
interval's lower bound is not below ``-margin`` (``--margin``, default 0.05), and, when given,
at most ``--max-regressions`` items regressed and no score key's mean delta is below
``--min-delta``; 1 when it is worse or the results cannot rule it out; 2 when the gate could
not run (unknown dataset, chain or label, evaluators or options that cannot be used). Usable
in CI before moving ``production``.

``--guard-dataset FILE`` also requires that the candidate's guard rails do no worse than the
baseline's on that guard dataset (``{"text", "label", "rail"}`` items, as ``guard_eval`` reads):
precision and recall, overall and per rail, not below the baseline's by more than
``--guard-margin`` (default 0; :mod:`advisors_app.guards.gate`). A regression fails the gate.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from advisors_app.evaluation.gate import DEFAULT_GATE_MARGIN, GateResult, run_gate
from advisors_app.evaluation.runs import EvalRunError
from advisors_app.guards.evaluation import GuardDatasetError, load_dataset
from advisors_app.guards.gate import DEFAULT_GUARD_MARGIN, GuardGateResult, guard_gate
from advisors_app.management.commands.eval_run import (
    add_run_options,
    parse_chat_options,
    parse_evaluator,
)

__all__ = ["Command", "verdict_lines"]


def verdict_lines(result: GateResult, candidate: str, baseline: str) -> list[str]:
    """The verdict as a person reads it: the runs and counts, then each score key's interval."""
    counts = result.comparison.counts()
    repeats = result.candidate.repeats
    lines = [
        f"{candidate} (run {result.candidate.pk}, v{result.candidate.version_number}) against "
        f"{baseline} (run {result.baseline.pk}, v{result.baseline.version_number})"
        + (f", each item {repeats} times" if repeats > 1 else "")
        + f": {counts['regressed']} regressed, {counts['improved']} improved, "
        f"{counts['unchanged']} unchanged"
        + (f"; reused the {' and '.join(result.reused)} run" if result.reused else "")
        + "."
    ]
    lines += [f"  {verdict.describe()}" for verdict in result.verdicts]
    return lines


class Command(BaseCommand):
    help = "Exit non-zero when a candidate label's version is worse than the baseline's."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", help="The dataset's slug.")
        parser.add_argument("--chain", required=True, help="The chain's slug.")
        parser.add_argument("--candidate", required=True, help="The label to judge (staging).")
        parser.add_argument(
            "--baseline", required=True, help="The label to compare with (production)."
        )
        parser.add_argument(
            "--margin",
            type=float,
            default=DEFAULT_GATE_MARGIN,
            help="Non-inferiority margin: fails when a score key's 95%% interval reaches below "
            f"-margin (0 to 1; default {DEFAULT_GATE_MARGIN}).",
        )
        parser.add_argument(
            "--max-regressions",
            type=int,
            help="Also fail when more items than this regressed (default: not counted).",
        )
        parser.add_argument(
            "--min-delta",
            type=float,
            help="Also fail when a score key's mean delta is below this (e.g. -0.02).",
        )
        add_run_options(parser)
        parser.add_argument(
            "--no-reuse", action="store_true", help="Run both versions even if runs exist."
        )
        parser.add_argument(
            "--guard-dataset",
            help="Also fail when the candidate's guard rails do worse on this guard dataset "
            "(JSON list of {text, label, rail}).",
        )
        parser.add_argument(
            "--guard-margin",
            type=float,
            default=DEFAULT_GUARD_MARGIN,
            help="How far guard precision or recall may fall (default 0).",
        )
        parser.add_argument("--json", action="store_true", help="Print the verdict as JSON.")

    @staticmethod
    def _guard_items(options: dict[str, Any]) -> list[dict[str, str]] | None:
        """The guard dataset's items, read before anything runs (``None``: none asked for)."""
        if not options["guard_dataset"]:
            return None
        try:
            return load_dataset(options["guard_dataset"])
        except GuardDatasetError as exc:
            raise CommandError(str(exc), returncode=2) from exc

    def handle(self, *args: Any, **options: Any) -> None:
        if options["max_regressions"] is not None and options["max_regressions"] < 0:
            raise CommandError("--max-regressions must be 0 or more.", returncode=2)
        try:
            evaluators = [parse_evaluator(text) for text in options["evaluator"]] or None
            chat_options = parse_chat_options(options["chat_options"])
        except CommandError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        guard_items = self._guard_items(options)
        try:
            result = run_gate(
                options["dataset"],
                options["chain"],
                candidate=options["candidate"],
                baseline=options["baseline"],
                margin=options["margin"],
                max_regressions=options["max_regressions"],
                min_delta=options["min_delta"],
                evaluators=evaluators,
                repeats=options["repeats"],
                chat_options=chat_options,
                reuse=not options["no_reuse"],
            )
        except EvalRunError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        guard: GuardGateResult | None = None
        if guard_items is not None:
            guard = guard_gate(
                guard_items,
                options["chain"],
                candidate=options["candidate"],
                baseline=options["baseline"],
                margin=options["guard_margin"],
            )
        reasons = list(result.reasons) + (guard.reasons if guard is not None else [])
        if options["json"]:
            body = result.to_dict()
            if guard is not None:
                body["guard"] = guard.to_dict()
                body["passed"] = not reasons
            self.stdout.write(json.dumps(body, indent=2))
        else:
            lines = verdict_lines(result, options["candidate"], options["baseline"])
            if guard is not None:
                lines += guard.lines(options["candidate"], options["baseline"])
            self.stdout.write("\n".join(lines))
        if reasons:
            raise CommandError("Gate failed: " + "; ".join(reasons), returncode=1)
        if not options["json"]:
            self.stdout.write("Gate passed.")
