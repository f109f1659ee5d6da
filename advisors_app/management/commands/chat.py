"""``manage.py chat CHAIN "question"``: one turn of a stored chain, streamed to the terminal.

Runs the turn through :func:`advisors_app.turn.stream_turn` — what every transport
uses — as a user (``--user NAME``; by default a user named ``admin``, else the first superuser,
else the only active user — the command says so when none fits), on the version
``production`` points at (``--label NAME`` or ``--chain-version N|draft`` for another;
``--version`` is Django's, as in every command: it prints Django's version). The
answer is printed as it streams, then the cited sources, the token usage, the time taken and
the conversation id to pass to ``--conversation`` for a follow-up (not when the turn stored
nothing and left no conversation: a guard's refusal of a first message); ``--params`` takes the
request params the service and the API accept (``{"options": {"max_tokens": 64}}``, a
filter...). Colours only when the
output is a terminal (Django's ``--no-color`` / ``--force-color`` apply). ``--json`` prints
one JSON object per event instead (``start``, ``sources``, ``tool_call``/``tool_result``,
``delta``..., then ``done`` or ``error``: the
payloads of :mod:`advisors_app.turn.events`). Exit status 1 when the input is refused (unknown
chain, blank message, bad conversation id: the service's ``TurnError``) or the turn fails; a
guard's refusal is an answer (its finish reason ``CONTENT_FILTER``, printed as such).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from advisors_app.core.advisors.safe_guard import CONTENT_FILTER, SAFEGUARD_MATCHED
from advisors_app.turn import TurnInput, stream_turn
from advisors_app.turn.events import (
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    GuardEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnError,
    error_event,
)

DEFAULT_USERNAME = "admin"


def _user(username: str | None) -> Any:
    model = get_user_model()
    if username:
        try:
            return model._default_manager.get_by_natural_key(username)
        except model.DoesNotExist:
            raise CommandError(f"no user {username!r}") from None
    users = model._default_manager.all()
    user = (
        users.filter(**{model.USERNAME_FIELD: DEFAULT_USERNAME}).first()
        or users.filter(is_superuser=True).order_by("pk").first()
    )
    if user is None:
        # A project whose one user is not a superuser (or not named admin) needs no flag.
        active = list(users.filter(is_active=True).order_by("pk")[:2])
        user = active[0] if len(active) == 1 else None
    if user is None:
        raise CommandError(
            "no user to chat as: pass --user NAME (or create an admin user with "
            "`manage.py advisors_setup`)"
        )
    return user


def _usage(usage: dict[str, Any] | None) -> str:
    if not usage:
        return "usage unknown"
    return (
        f"{usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} "
        f"completion = {usage.get('total_tokens', 0)} tokens"
    )


class Command(BaseCommand):
    help = "Ask a chain one question and stream the answer, its sources and usage."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("chain", help="Slug of the chain, e.g. python-docs.")
        parser.add_argument("message", help="The user's message.")
        parser.add_argument(
            "--conversation", help="Continue this conversation (the id a previous turn printed)."
        )
        parser.add_argument(
            "--json", action="store_true", help="Print each event as one line of JSON."
        )
        parser.add_argument(
            "--user",
            help=f"Username to chat as (default: {DEFAULT_USERNAME!r}, else the first superuser, "
            "else the only active user).",
        )
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--chain-version",
            dest="chain_version",
            metavar="N",
            help='Run chain version N, or "draft" (default: the version production points at; '
            "--version prints Django's version).",
        )
        which.add_argument("--label", help="Run the version this label points at.")
        parser.add_argument(
            "--params",
            type=json.loads,
            help='Request params as JSON, as the API takes them: {"options": {"max_tokens": 64}}.',
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = _user(options["user"])
        version = options["chain_version"]
        if version is not None and version != "draft":
            if not (version.isascii() and version.isdigit()):
                raise CommandError(f"--chain-version must be a number or 'draft', got {version!r}")
            version = int(version)
        data = TurnInput(
            options["message"],
            options["conversation"],
            options["params"],
            options["label"],
            version,
        )
        asyncio.run(self._chat(options["chain"], user, data, options["json"]))

    def _write(self, text: str, ending: str = "\n") -> None:
        self.stdout.write(text, ending=ending)
        self.stdout.flush()

    async def _chat(
        self,
        chain: str,
        user: Any,
        data: TurnInput,
        as_json: bool,
    ) -> None:
        started = time.perf_counter()
        try:
            stream = await stream_turn(chain, user, data)
        except TurnError as exc:
            if as_json:
                self._write(json.dumps(error_event(exc).to_dict(), ensure_ascii=False))
            # A field's message that only repeats the refusal's own is said once.
            details = "; ".join(
                f"{field}: {' '.join(messages)}"
                for field, messages in exc.errors.items()
                if " ".join(messages) != exc.message
            )
            raise CommandError(f"{exc.message} {details}".strip(), returncode=1) from None
        first_token: float | None = None
        async with stream:
            async for event in stream:
                if as_json:
                    self._write(json.dumps(event.to_dict(), ensure_ascii=False))
                elif isinstance(event, DeltaEvent):
                    if first_token is None:
                        first_token = time.perf_counter() - started
                    self._write(event.text, ending="")
                elif isinstance(event, ToolCallEvent):
                    self._write(self.style.NOTICE(f"[tool {event.name} {event.arguments}]"))
                elif isinstance(event, ToolResultEvent):
                    outcome = "ok" if event.ok else f"failed: {event.error}"
                    self._write(
                        self.style.NOTICE(
                            f"[tool {event.name}: {outcome}, {event.duration_ms:.0f} ms]"
                        )
                    )
                elif isinstance(event, GuardEvent):
                    failed = " (the check failed)" if event.failed else ""
                    self._write(
                        self.style.WARNING(
                            f"[guard {event.check} on {event.rail}: {event.action}{failed}]"
                        )
                    )
                elif isinstance(event, DoneEvent):
                    self._summary(event, time.perf_counter() - started, first_token)
                if isinstance(event, ErrorEvent):
                    if not as_json:
                        self._write("")
                    raise CommandError(f"{event.code}: {event.message}", returncode=1)

    def _summary(self, done: DoneEvent, elapsed: float, first_token: float | None) -> None:
        style = self.style
        self._write("")
        if done.finish_reason == CONTENT_FILTER:
            matched = ", ".join(done.outcome.metadata.get(SAFEGUARD_MATCHED) or ())
            self._write(style.WARNING(f"Refused by the guard (matched: {matched or '?'})."))
        sources = done.outcome.sources
        if sources:
            self._write(style.MIGRATE_HEADING("Sources:"))
            for source in sources:
                score = source["score"]
                similarity = f"  similarity {score:.2f}" if isinstance(score, float) else ""
                self._write(f"  - {source['title']} ({source['source']}){similarity}")
        timing = f"{elapsed:.1f} s"
        if first_token is not None:
            timing += f", first text after {first_token:.1f} s"
        self._write(style.NOTICE(f"{_usage(done.usage)}; {timing}."))
        if done.conversation_id is not None:
            self._write(
                style.NOTICE("Continue with: ")
                + style.SQL_FIELD(f"--conversation {done.conversation_id}")
            )
