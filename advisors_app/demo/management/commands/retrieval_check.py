"""``manage.py retrieval_check [--chain python-docs]``: hit@1 and hit@5 of a chain's retriever.

Builds the chain as the runtime does (:func:`advisors_app.definition.runtime.load_chain`), takes its
retrieval advisor's store, ``top_k``, threshold and filter
(:func:`advisors_app.demo.retrieval.chain_retriever`), and asks every question of the
questions file (default: the demo's ``questions.json``). Prints hit@1, hit@top_k (what the
model is shown) and hit@5; ``-v 2`` also lists the misses. Searches see the collection's
shared documents (no user's private uploads).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser

from advisors_app.definition.runtime import (
    ChainConfigurationError,
    ChainNotFound,
    VersionNotFound,
    load_chain,
)
from advisors_app.demo.loader import MAIN_CHAIN
from advisors_app.demo.retrieval import (
    QUESTIONS_FILE,
    chain_retriever,
    evaluate,
    load_questions,
)


class Command(BaseCommand):
    help = "Measure hit@1 and hit@5 of a chain's retriever on questions with known topics."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chain", default=MAIN_CHAIN, help=f"Default: {MAIN_CHAIN}.")
        parser.add_argument(
            "--questions",
            type=Path,
            default=QUESTIONS_FILE,
            help="JSON file of {question, topic} entries (default: the demo's).",
        )
        parser.add_argument("--limit", type=int, help="Only the first N questions.")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            compiled = load_chain(options["chain"])
        except ChainNotFound:
            raise CommandError(f"no enabled chain {options['chain']!r}") from None
        except (VersionNotFound, ChainConfigurationError) as exc:
            raise CommandError(str(exc)) from exc
        try:
            retriever = chain_retriever(compiled.advisors)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        try:
            questions = load_questions(options["questions"])
        except (ValueError, OSError) as exc:
            raise CommandError(f"cannot read questions from {options['questions']}: {exc}") from exc
        if options["limit"] is not None:
            questions = questions[: options["limit"]]
        if not questions:
            raise CommandError("no questions to ask")
        ks = sorted({1, retriever.top_k, 5})
        started = time.perf_counter()
        # async_to_sync, not asyncio.run: the store's queries then run on this thread, in
        # its connection (and transaction), as they do under a Django view.
        report = async_to_sync(evaluate)(retriever, questions, ks)
        elapsed = time.perf_counter() - started
        rates = {f"hit@{k}": round(report.rate(k), 3) for k in ks}
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "chain": compiled.slug,
                        "questions": len(questions),
                        "top_k": retriever.top_k,
                        "similarity_threshold": retriever.similarity_threshold,
                        **rates,
                    }
                )
            )
            return
        self.stdout.write(
            f"Chain {compiled.slug} ({retriever.advisor}, top_k {retriever.top_k}, "
            f"similarity >= {retriever.similarity_threshold:g}): {len(questions)} questions "
            f"in {elapsed:.1f} s"
        )
        self.stdout.write(
            self.style.SUCCESS(
                "  ".join(
                    f"hit@{k} {report.rate(k):.2f} ({report.hits(k)}/{len(questions)})" for k in ks
                )
            )
        )
        if options["verbosity"] >= 2:
            for question, got in report.misses(max(ks)):
                self.stdout.write(
                    f"  miss: {question.question!r} expected {question.topic}, got "
                    + (", ".join(got) or "nothing")
                )
