"""``manage.py guard_eval FILE --chain SLUG [--label L|--version N] [--json]``: how well a
chain's guard rails tell attacks from benign texts.

Screens every item of the guard dataset ``FILE`` (a JSON list of ``{"text", "label":
"attack"|"benign", "rail"}``; the shipped one is ``advisors_app/guards/data/guard_dataset.json``)
on its rail with the chain's ``guard`` advisors (:mod:`advisors_app.guards.evaluation`) and
prints ``precision``, ``recall``, ``f1`` and ``latency_ms`` (``p50``, ``p95``: milliseconds of
one item's rail) overall and ``by_rail``; ``--json`` prints them as one JSON object (without the
per-item results unless ``--items``). Exit status 1 with a message when the file or the chain
cannot be used, or the chain has no guard advisor.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from advisors_app.core.advisors.guard import GuardAdvisor
from advisors_app.definition.runtime import load_chain
from advisors_app.guards.evaluation import GuardDatasetError, evaluate, load_dataset
from advisors_app.management.commands.eval_run import ChainVersionCommand

__all__ = ["Command"]


class Command(ChainVersionCommand):
    help = "Precision, recall, F1 and latency of a chain's guard rails on a guard dataset."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="Guard dataset: JSON list of {text, label, rail}.")
        parser.add_argument("--chain", required=True, help="Slug of the chain.")
        parser.add_argument("--label", default=None, help="Version label (default production).")
        parser.add_argument(
            "--chain-version",
            "--version",  # the first spelling, kept
            dest="version",
            default=None,
            help="Version number, or 'draft'.",
        )
        parser.add_argument("--json", action="store_true", help="Print JSON.")
        parser.add_argument("--items", action="store_true", help="With --json: per-item results.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            items = load_dataset(options["file"])
        except GuardDatasetError as exc:
            raise CommandError(str(exc)) from exc
        version = options["version"]
        if version is not None and version != "draft":
            try:
                version = int(version)
            except ValueError as exc:
                raise CommandError(
                    f"--version must be a number or 'draft', got {version!r}"
                ) from exc
        try:
            compiled = load_chain(options["chain"], label=options["label"], version=version)
        except Exception as exc:
            raise CommandError(f"chain {options['chain']!r}: {exc}") from exc
        guards = [a for a in compiled.advisors if isinstance(a, GuardAdvisor)]
        if not guards:
            raise CommandError(
                f"chain {options['chain']!r} has no guard advisor: add one of type 'guard'"
            )
        report = evaluate(guards, items)
        if not options["items"]:
            report.pop("results")
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
            return
        self.stdout.write(f"guard_eval {options['file']} on chain {options['chain']!r}")
        self.stdout.write(_line("overall", report))
        for rail, figures in report["by_rail"].items():
            self.stdout.write(_line(rail, figures))


def _line(name: str, figures: dict[str, Any]) -> str:
    latency = figures["latency_ms"]
    return (
        f"{name:>14}: precision {figures['precision']:.3f}  recall {figures['recall']:.3f}  "
        f"f1 {figures['f1']:.3f}  latency_ms p50 {latency['p50']:.2f} p95 {latency['p95']:.2f}  "
        f"({figures['items']} items)"
    )
