"""Chat-memory cost on PostgreSQL: a conversation of 10, 1,000 and 100,000 stored messages.

Prints the median time of reading the window (``MessageWindowChatMemory(max_messages=20).get``,
sync and async) and of appending one turn, for the three conversation sizes in the same run,
and the ratio largest / smallest (about 1 when the cost does not grow with the conversation).
The peer is Spring AI's
way of reading (``findByConversationId``: load the whole conversation, then window it in memory),
measured on the same database in the same run.

Run: ``python benchmarks/memory_window.py`` (from the repository's virtualenv). With
``DATABASE_URL`` set it uses that server; otherwise it starts a throwaway embedded PostgreSQL
(``advisorsite/embedded_db.py``). Either way it works in a fresh test database that it drops at
the end. ``--explain`` also prints the query plan of the window read; ``--json PATH`` writes
the results.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "advisorsite.settings")
os.environ.setdefault("DJANGO_SECRET_KEY", "benchmark-only-not-secret")
if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault("ADVISORS_EMBEDDED_DB", "throwaway")

import django

django.setup()

from asgiref.sync import sync_to_async  # noqa: E402
from django.db import connection, connections  # noqa: E402

from advisors_app.core import AssistantMessage, SystemMessage, UserMessage  # noqa: E402
from advisors_app.core.memory import MessageWindowChatMemory, select_window  # noqa: E402
from advisors_app.stores.memory import DjangoChatMemoryRepository  # noqa: E402
from benchmarks._common import header, machine, write_json  # noqa: E402

SIZES = (10, 1_000, 100_000)
WINDOW = 20


def conversation(size: int) -> list:
    messages: list = [SystemMessage("You are a helpful assistant.")]
    for i in range((size - 1) // 2 + 1):
        messages.append(UserMessage(f"Question {i}: what about item {i}?"))
        messages.append(AssistantMessage(f"Answer {i}: item {i} is fine, thanks for asking."))
    return messages[:size]


def median_ms(runs: list[Callable[[], object]], repeats: int, per: int) -> list[float]:
    """Median ms per call of each of ``runs``; repetitions interleave them (A B C, A B C, ...),
    so load from other work on the machine falls on every conversation size alike."""
    samples: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for run, values in zip(runs, samples, strict=True):
            start = time.perf_counter()
            for _ in range(per):
                run()
            values.append((time.perf_counter() - start) / per)
    return [statistics.median(values) * 1e3 for values in samples]


def spring_style_get(repository: DjangoChatMemoryRepository, conversation_id: str) -> list:
    """Spring AI's read: the whole conversation, windowed in memory."""
    messages = repository.find_by_conversation_id(conversation_id)
    system = [m for m in messages if isinstance(m, SystemMessage)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    return [*system, *(select_window(rest, WINDOW, lambda m: 1, complete=True) or [])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    info = machine()
    header(
        "chat memory on PostgreSQL",
        "reading the chat-memory window and appending a turn through the ORM repository at "
        "10 to 100,000 stored messages, against a Spring-style read of the whole conversation",
        info,
    )

    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        repository = DjangoChatMemoryRepository()
        memory = MessageWindowChatMemory(repository, max_messages=WINDOW)
        start = time.perf_counter()
        for size in SIZES:
            repository.save_all(f"size-{size}", conversation(size))
        print(f"filled conversations of {SIZES} messages in {time.perf_counter() - start:.1f} s")
        for size in SIZES:
            cid = f"size-{size}"
            assert memory.get(cid) == spring_style_get(repository, cid)

        loop = asyncio.new_event_loop()
        turn = [UserMessage("One more question?"), AssistantMessage("One more answer.")]
        rows = []
        for key, label, make, repeats, per in (
            (
                "get",
                "window read, sync (get)",
                lambda cid: lambda: memory.get(cid),
                args.repeats,
                50,
            ),
            (
                "aget",
                "window read, async (aget)",
                lambda cid: lambda: loop.run_until_complete(memory.aget(cid)),
                args.repeats,
                50,
            ),
            (
                "add",
                "append one turn (add)",
                lambda cid: lambda: memory.add(cid, turn),
                args.repeats,
                20,
            ),
            (
                "spring_read",
                "peer: Spring AI read (whole conversation)",
                lambda cid: lambda: spring_style_get(repository, cid),
                3,
                1,
            ),
        ):
            times = median_ms([make(f"size-{size}") for size in SIZES], repeats, per)
            rows.append((key, label, times, times[-1] / times[0]))
        # Async ORM calls ran in asgiref's worker thread: close its connection there.
        loop.run_until_complete(sync_to_async(connections.close_all)())
        loop.close()

        sizes = "".join(f"{f'{size:,} msgs':>14}" for size in SIZES)
        heading = f"{'operation':44}{sizes} {f'{SIZES[-1]:,} / {SIZES[0]:,}':>16}"
        print(f"\nmedian ms per operation on PostgreSQL (window = {WINDOW} messages)")
        print(heading)
        print("-" * len(heading))
        for _key, label, times, ratio in rows:
            print(f"{label:44}" + "".join(f"{t:14.3f}" for t in times) + f" {ratio:15.2f}x")
        write_json(
            args.json,
            "memory_window",
            {"sizes": list(SIZES), "window": WINDOW, "repeats": args.repeats},
            {
                key: {"ms": dict(zip(map(str, SIZES), times, strict=True)), "ratio": ratio}
                for key, _label, times, ratio in rows
            },
            info,
        )

        if args.explain:
            print("\nplans of the window read on the 100,000-message conversation:")
            for queryset in window_querysets(f"size-{SIZES[-1]}"):
                print(queryset.explain(analyze=True), end="\n\n")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def window_querysets(conversation_id: str) -> list:
    """The queries ``memory.get`` runs (as ``DjangoChatMemoryRepository`` builds them)."""
    from advisors_app.models import ChatMessage, Conversation

    pk, last = (
        Conversation.objects.filter(conversation_id=conversation_id)
        .values_list("pk", "last_sequence")
        .get()
    )
    return [
        ChatMessage.objects.filter(
            conversation__conversation_id=conversation_id, message_type="system"
        ).order_by("sequence"),
        Conversation.objects.filter(conversation_id=conversation_id)
        .order_by()
        .values_list("pk", "last_sequence")[:1],
        ChatMessage.objects.filter(conversation_id=pk, sequence__gt=last - WINDOW - 1 - 16)
        .exclude(message_type="system")
        .order_by("-sequence")[: WINDOW + 1],
    ]


if __name__ == "__main__":
    main()
