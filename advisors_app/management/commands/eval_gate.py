"""``manage.py eval_gate DATASET --chain SLUG --candidate LABEL --baseline LABEL
[--max-regressions N] [--min-delta X] [--evaluator KEY[:JSON]]... [--no-reuse] [--json]``.

Evaluates the versions the two labels point at on the dataset (reusing finished runs of those
versions when the dataset did not change since; ``--no-reuse`` runs both afresh), compares
them (:mod:`advisors_app.evaluation.gate`) and prints the verdict. **Exit status**: 0 when the
candidate is no worse (at most ``--max-regressions`` items regressed, default 0, and, with
``--min-delta``, no score key's mean delta below it); 1 when it is worse; 2 when the gate could
not run (unknown dataset, chain or label, evaluators that cannot be built). Usable in CI before
moving ``production``.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from advisors_app.evaluation.gate import run_gate
from advisors_app.evaluation.runs import EvalRunError
from advisors_app.management.commands.eval_run import parse_evaluator

__all__ = ["Command"]


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
            "--max-regressions", type=int, default=0, help="Items that may regress (default 0)."
        )
        parser.add_argument(
            "--min-delta",
            type=float,
            help="Lowest mean delta allowed per score key (e.g. -0.02); default: not checked.",
        )
        parser.add_argument(
            "--evaluator",
            action="append",
            default=[],
            metavar="KEY[:JSON]",
            help="An evaluator with optional JSON params; repeatable (default: by the items).",
        )
        parser.add_argument(
            "--no-reuse", action="store_true", help="Run both versions even if runs exist."
        )
        parser.add_argument("--json", action="store_true", help="Print the verdict as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["max_regressions"] < 0:
            raise CommandError("--max-regressions must be 0 or more.", returncode=2)
        try:
            evaluators = [parse_evaluator(text) for text in options["evaluator"]] or None
        except CommandError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        try:
            result = run_gate(
                options["dataset"],
                options["chain"],
                candidate=options["candidate"],
                baseline=options["baseline"],
                max_regressions=options["max_regressions"],
                min_delta=options["min_delta"],
                evaluators=evaluators,
                reuse=not options["no_reuse"],
            )
        except EvalRunError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        if options["json"]:
            self.stdout.write(json.dumps(result.to_dict(), indent=2))
        else:
            counts = result.comparison.counts()
            self.stdout.write(
                f"{options['candidate']} (run {result.candidate.pk}, "
                f"v{result.candidate.version_number}) against {options['baseline']} "
                f"(run {result.baseline.pk}, v{result.baseline.version_number}): "
                f"{counts['regressed']} regressed, {counts['improved']} improved, "
                f"{counts['unchanged']} unchanged"
                + (f"; reused the {' and '.join(result.reused)} run" if result.reused else "")
                + "."
            )
            for key, score in result.comparison.scores.items():
                if score.delta is not None:
                    self.stdout.write(
                        f"  {key}: delta {score.delta:+.4f} "
                        f"[{score.ci_low:+.4f}, {score.ci_high:+.4f}]"
                    )
        if not result.passed:
            raise CommandError("The candidate is worse: " + "; ".join(result.reasons), returncode=1)
        if not options["json"]:
            self.stdout.write("Gate passed.")
