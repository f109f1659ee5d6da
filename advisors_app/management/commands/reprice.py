"""``manage.py reprice --since DATE``: recompute stored call-log costs after a price fix.

Every call log created from ``--since`` up to ``--until`` (default: now; optionally of one
chain, ``--chain SLUG``) is priced again from its ``cost_rounds``: each round's token counts at
the price valid at the log's ``created`` time for the chat-model configuration it ran on
(:meth:`advisors_app.costs.pricing.PriceBook.price_for`, admin prices read fresh), and the log's
totals worked out as the turn service works them out
(:func:`advisors_app.costs.metering.cost_summary`). A configuration's base URL, which the rounds do
not keep, comes from its model-config row, else its ``ADVISORS["CHAT_MODELS"]`` alias.

Logs are read and written in batches (``--batch-size``); only those whose cost changed are
written. It prints how many changed and the total before and after per currency (and how many
had an unknown price). ``--dry-run`` writes nothing. Budgets' counters are not rewritten: what
a period has spent stays what was booked when its calls ran.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from advisors_app.costs.budgets import money
from advisors_app.costs.metering import cost_summary
from advisors_app.costs.pricing import Cost, ModelRef, PriceBook, cost_of, price_book
from advisors_app.definition.providers import chat_model_configs
from advisors_app.models import CallLog, ChatModelConfig

#: The call-log fields this command rewrites.
COST_FIELDS = ("input_cost", "output_cost", "total_cost", "currency", "price_source", "cost_rounds")
#: What a cost column keeps (``cost_field``: 10 decimal places).
_PLACES = Decimal("1E-10")
DATE_FORMAT = "an ISO date (2026-11-01) or date and time (2026-11-01T14:30, +01:00 optional)"


def _moment(text: str, option: str) -> datetime:
    """``text`` as an aware datetime (a date: its midnight, in the current time zone)."""
    try:
        # fromisoformat first: a date alone is its midnight.
        value = parse_datetime(text.strip())
    except ValueError:  # well-formed, but no such day or time (2026-02-30)
        value = None
    if value is None:
        raise CommandError(f"{option} {text!r} is not a date: give {DATE_FORMAT}.")
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def _configs() -> dict[str, Mapping[str, Any]]:
    """Every chat-model configuration by slug: the settings aliases, then the rows (a row
    stands for the alias of its slug, as a chain's build takes it)."""
    rows = {row.slug: row.to_config() for row in ChatModelConfig.objects.all()}
    return {**chat_model_configs(), **rows}


def _ref(entry: Mapping[str, Any], configs: Mapping[str, Mapping[str, Any]]) -> ModelRef:
    """The model a stored round ran on; the base URL from its configuration, while that
    configuration still names the round's provider."""
    slug, provider = str(entry.get("model_config") or ""), str(entry.get("provider") or "")
    config = configs.get(slug, {})
    base_url = config.get("base_url") if config.get("provider") == provider else None
    return ModelRef(slug, provider, str(entry.get("model") or ""), str(base_url or ""))


def _text(value: Decimal | None) -> str | None:
    return None if value is None else money(value)


def _stored(value: Decimal | None) -> Decimal | None:
    """``value`` as its cost column stores it."""
    return None if value is None else value.quantize(_PLACES)


def repriced(
    log: CallLog, book: PriceBook, configs: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The cost fields of ``log`` at the prices valid when it was created."""
    rounds: list[tuple[dict[str, Any], Cost]] = []
    for entry in log.cost_rounds:
        price = book.price_for(_ref(entry, configs), at=log.created)
        cost = cost_of(
            price,
            int(entry.get("prompt_tokens") or 0),
            int(entry.get("completion_tokens") or 0),
            int(entry.get("cached_prompt_tokens") or 0),
        )
        rounds.append(
            (
                {
                    **entry,
                    "input_cost": _text(cost.input),
                    "output_cost": _text(cost.output),
                    "currency": cost.currency,
                    "price_source": str(cost.source),
                },
                cost,
            )
        )
    summary = cost_summary(rounds)
    return {
        "input_cost": _stored(summary.get("input_cost")),
        "output_cost": _stored(summary.get("output_cost")),
        "total_cost": _stored(summary.get("total_cost")),
        "currency": summary.get("currency", ""),
        "price_source": str(summary.get("price_source", "")),
        "cost_rounds": summary["cost_rounds"],
    }


class _Totals:
    """Total cost per currency, and how many logs had an unknown price."""

    def __init__(self) -> None:
        self.amounts: defaultdict[str, Decimal] = defaultdict(Decimal)
        self.unknown = 0

    def add(self, total: Decimal | None, currency: str) -> None:
        if total is None:
            self.unknown += 1
        else:
            self.amounts[currency] += total

    def describe(self) -> str:
        parts = [
            f"{money(amount)} {currency or '(no currency)'}"
            for currency, amount in sorted(self.amounts.items())
        ]
        parts.append(f"{self.unknown} with an unknown price")
        return "; ".join(parts)


class Command(BaseCommand):
    help = (
        "Recompute the cost of call logs created since --since (until --until, of --chain) "
        "from their stored token counts, at the prices valid when each call ran: run it after "
        "fixing a price (Model prices in the admin). Budgets' counters are not rewritten."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since",
            required=True,
            metavar="DATE",
            help="Logs created at or after DATE: an ISO date (2026-11-01, its midnight in the "
            "site's time zone) or date and time (2026-11-01T14:30, +01:00 optional).",
        )
        parser.add_argument(
            "--until", metavar="DATE", help="Logs created before DATE (default: now)."
        )
        parser.add_argument("--chain", metavar="SLUG", help="Only this chain's logs.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Show what would change; write nothing."
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=500,
            metavar="N",
            help="Logs read and written per batch (default 500).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        since = _moment(options["since"], "--since")
        until = _moment(options["until"], "--until") if options["until"] else None
        if until is not None and until <= since:
            raise CommandError(f"--until ({until.isoformat()}) must be after --since.")
        batch_size = options["batch_size"]
        if batch_size < 1:
            raise CommandError(f"--batch-size must be at least 1, not {batch_size}.")
        logs = CallLog.objects.filter(created__gte=since).exclude(cost_rounds=[])
        if until is not None:
            logs = logs.filter(created__lt=until)
        if options["chain"]:
            logs = logs.filter(chain_slug=options["chain"])
        book, configs = price_book(fresh=True), _configs()
        before, after = _Totals(), _Totals()
        seen = changed = 0
        pending: list[CallLog] = []
        rows = logs.only("pk", "created", *COST_FIELDS).order_by("pk")
        for log in rows.iterator(chunk_size=batch_size):
            seen += 1
            fields = repriced(log, book, configs)
            before.add(log.total_cost, log.currency)
            after.add(fields["total_cost"], fields["currency"])
            if all(getattr(log, name) == value for name, value in fields.items()):
                continue
            changed += 1
            for name, value in fields.items():
                setattr(log, name, value)
            pending.append(log)
            if len(pending) >= batch_size:
                self._write(pending, options["dry_run"])
        self._write(pending, options["dry_run"])
        span = f"created from {since.isoformat()} to {until.isoformat() if until else 'now'}"
        chain = f" of chain {options['chain']!r}" if options["chain"] else ""
        verb = "would change (dry run: nothing written)" if options["dry_run"] else "changed"
        self.stdout.write(f"{changed} of {seen} call logs{chain} {span} {verb}.")
        self.stdout.write(f"Total before: {before.describe()}.")
        self.stdout.write(f"Total after: {after.describe()}.")

    @staticmethod
    def _write(logs: list[CallLog], dry_run: bool) -> None:
        if logs and not dry_run:
            CallLog.objects.bulk_update(logs, COST_FIELDS)
        logs.clear()
