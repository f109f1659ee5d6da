"""``manage.py eval_run DATASET --chain SLUG [--chain-version N|--label L]
[--evaluator KEY[:JSON]]... [--repeats N] [--chat-options JSON] [--as-of TIME] [--json]``:
evaluate a chain version on a dataset, synchronously.

Runs what a queued run runs (:mod:`advisors_app.evaluation.runs`: every item through the real turn
pipeline, the evaluators, the results and scores stored), in this process, and prints the
summary — per score key the mean and pass rate — or, with ``--json``, ``{"run", "status",
"dataset", "chain", "version", "label", "repeats", "chat_options", "as_of", "summary"}``.
``--chain-version`` takes a chain version's number or ``draft`` (``manage.py chat`` and
``guard_eval`` spell it the same); ``--version``, its first spelling, still works here and
replaces Django's ``--version`` (which would print Django's version); without it, ``--label``
(default ``production``). ``--evaluator`` (repeatable) names a registered evaluator with
optional JSON params (``contains:{"values": ["5 days"]}``); without any, the defaults for what
the items expect. ``--repeats`` runs each item that many times; ``--chat-options`` replaces the
options pinned on every item (default ``{"temperature": 0, "seed": 0}``; ``{}`` pins nothing).
Exit status 0 when the run completed, whatever it scored (``eval_gate`` judges); 1 with a
message when it could not run.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from advisors_app.evaluation.run_options import MAX_REPEATS
from advisors_app.evaluation.runs import EvalRunError, create_run, execute_run
from advisors_app.models import EvalRun

__all__ = [
    "ChainVersionCommand",
    "Command",
    "add_run_options",
    "parse_chat_options",
    "parse_evaluator",
    "run_payload",
    "summary_lines",
]


class ChainVersionCommand(BaseCommand):
    """A command whose ``--version`` names a chain version, not Django's: Django's own
    ``--version`` option (print Django's version and exit) is replaced by the command's."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)


def add_run_options(parser: CommandParser) -> None:
    """``--evaluator``, ``--repeats`` and ``--chat-options``: how a run judges and asks."""
    parser.add_argument(
        "--evaluator",
        action="append",
        default=[],
        metavar="KEY[:JSON]",
        help="An evaluator with optional JSON params; repeatable (default: by the items).",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help=f"Times each item runs (1 to {MAX_REPEATS}; default 1).",
    )
    parser.add_argument(
        "--chat-options",
        metavar="JSON",
        help='Chat options pinned on every item (default {"temperature": 0, "seed": 0}; '
        "{} pins nothing).",
    )


def parse_chat_options(text: str | None) -> dict[str, Any] | None:
    """``--chat-options`` as a dict (``None``: not given, the default pinning)."""
    if text is None:
        return None
    try:
        options = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"--chat-options {text!r}: not JSON: {exc}") from exc
    if not isinstance(options, dict):
        raise CommandError(f"--chat-options {text!r}: give a JSON object.")
    return options


def parse_evaluator(text: str) -> dict[str, Any]:
    """``KEY`` or ``KEY:{json params}`` as ``{"key", "params"}``; ``CommandError`` otherwise."""
    key, _, params_text = text.partition(":")
    params: Any = {}
    if params_text:
        try:
            params = json.loads(params_text)
        except ValueError as exc:
            raise CommandError(f"--evaluator {text!r}: the params are not JSON: {exc}") from exc
        if not isinstance(params, dict):
            raise CommandError(f"--evaluator {text!r}: the params must be a JSON object.")
    return {"key": key.strip(), "params": params}


def run_payload(run: EvalRun) -> dict[str, Any]:
    """What ``--json`` prints of a run."""
    return {
        "run": run.pk,
        "status": run.status,
        "dataset": run.dataset.slug,
        "chain": run.chain_slug,
        "version": run.version_number,
        "label": run.label or None,
        "repeats": run.repeats,
        "chat_options": run.chat_options,
        "as_of": run.as_of.isoformat(),
        "summary": run.summary,
    }


def summary_lines(run: EvalRun) -> list[str]:
    """The summary as a person reads it: a heading, then one line per score key."""
    summary = run.summary or {}
    lines = [
        f"Run {run.pk}: {run.chain_slug} {run.target_display()} on {run.dataset.slug}: "
        f"{summary.get('items', 0)} items, {summary.get('errors', 0)} errors.",
        f"  each item {_times(run.repeats)}, chat options pinned: "
        + (
            ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(run.chat_options.items())) or "none"
        ),
    ]
    for key, row in (summary.get("evaluators") or {}).items():
        mean = "-" if row["mean"] is None else f"{row['mean']:.3f}"
        rate = "-" if row["pass_rate"] is None else f"{row['pass_rate']:.1%}"
        lines.append(f"  {key}: mean {mean}, pass rate {rate} ({row['passed']}/{row['judged']})")
    return lines


def _times(repeats: int) -> str:
    return "once" if repeats == 1 else f"{repeats} times"


class Command(ChainVersionCommand):
    help = "Evaluate a chain version on a dataset (synchronously) and print the summary."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", help="The dataset's slug.")
        parser.add_argument("--chain", required=True, help="The chain's slug.")
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--chain-version",
            "--version",  # the first spelling, kept
            dest="version",
            metavar="N",
            help='A chain version: its number, or "draft".',
        )
        which.add_argument("--label", help="A label (default: production).")
        add_run_options(parser)
        parser.add_argument("--as-of", help="The dataset as it was then (ISO date/time).")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        evaluators = [parse_evaluator(text) for text in options["evaluator"]] or None
        as_of = None
        if options["as_of"]:
            try:
                as_of = parse_datetime(options["as_of"].strip())
            except ValueError:
                as_of = None
            if as_of is None:
                raise CommandError(f"--as-of {options['as_of']!r} is not an ISO date or time.")
            if timezone.is_naive(as_of):
                as_of = timezone.make_aware(as_of)
        try:
            run = create_run(
                options["dataset"],
                options["chain"],
                label=options["label"],
                version=options["version"],
                evaluators=evaluators,
                as_of=as_of,
                repeats=options["repeats"],
                chat_options=parse_chat_options(options["chat_options"]),
            )
        except EvalRunError as exc:
            raise CommandError(str(exc)) from exc
        try:
            execute_run(run.pk)
        except Exception as exc:
            raise CommandError(f"Run {run.pk} failed: {type(exc).__name__}: {exc}") from exc
        run.refresh_from_db()
        if options["json"]:
            self.stdout.write(json.dumps(run_payload(run), indent=2))
        else:
            self.stdout.write("\n".join(summary_lines(run)))
