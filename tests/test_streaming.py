"""DeltaCoalescer: fewer delta events, the first never delayed, no text lost or reordered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from advisors_app.turn import TurnOutcome
from advisors_app.turn.delivery import DeltaCoalescer
from advisors_app.turn.events import DeltaEvent, DoneEvent, StartEvent, TurnEvent

START = StartEvent("c1", "support", "t1")
DONE = DoneEvent("complete", TurnOutcome("ok", "c1", "", None, {}, "STOP", "t1", "chain"))


async def timed(
    *steps: tuple[float, TurnEvent], closed: list[str] | None = None
) -> AsyncIterator[TurnEvent]:
    """Yield each event after sleeping its delay (seconds); record a close in ``closed``."""
    try:
        for delay, event in steps:
            await asyncio.sleep(delay)
            yield event
    finally:
        if closed is not None:
            closed.append("closed")


async def collect(coalescer: DeltaCoalescer) -> list[tuple[float, Any]]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    return [(loop.time() - started, event) async for event in coalescer]


def texts(events: list[tuple[float, Any]]) -> list[str]:
    return [e.text for _, e in events if isinstance(e, DeltaEvent)]


async def test_a_slow_stream_passes_through_unchanged() -> None:
    steps = [(0, START), *((0.06, DeltaEvent(f"w{i} ")) for i in range(4)), (0, DONE)]
    events = await collect(DeltaCoalescer(timed(*steps), interval=0.04, max_chars=64))
    assert [e for _, e in events] == [e for _, e in steps]


async def test_a_fast_stream_is_merged_and_the_first_piece_is_not_delayed() -> None:
    pieces = [f"{i:02d}" for i in range(60)]
    steps = [(0, START), *((0.002, DeltaEvent(p)) for p in pieces), (0, DONE)]
    events = await collect(DeltaCoalescer(timed(*steps), interval=0.04, max_chars=1000))
    assert events[0][1] == START and events[-1][1] == DONE
    assert texts(events)[0] == "00"
    assert "".join(texts(events)) == "".join(pieces)
    assert 2 < len(texts(events)) < 20


async def test_held_text_goes_out_on_time_while_the_source_is_silent() -> None:
    steps = [(0, DeltaEvent("a")), (0.005, DeltaEvent("b")), (0.5, DeltaEvent("c")), (0, DONE)]
    events = await collect(DeltaCoalescer(timed(*steps), interval=0.04, max_chars=64))
    assert [(e.text if isinstance(e, DeltaEvent) else e) for _, e in events] == [
        "a",
        "b",
        "c",
        DONE,
    ]
    # "b" was held for the interval, not until the next piece 500 ms later.
    assert 0.03 <= events[1][0] < 0.3


async def test_held_text_reaching_max_chars_goes_out_at_once() -> None:
    steps = [(0, DeltaEvent("x")), *((0.001, DeltaEvent("y" * 10)) for _ in range(10)), (0, DONE)]
    events = await collect(DeltaCoalescer(timed(*steps), interval=10.0, max_chars=25))
    assert texts(events) == ["x", "y" * 30, "y" * 30, "y" * 30, "y" * 10]


async def test_held_text_goes_out_before_the_final_event() -> None:
    steps = [(0, DeltaEvent("a")), (0.001, DeltaEvent("b")), (0, DONE)]
    events = await collect(DeltaCoalescer(timed(*steps), interval=10.0, max_chars=64))
    assert [e for _, e in events] == [DeltaEvent("a"), DeltaEvent("b"), DONE]


async def test_closing_stops_the_source_and_keeps_the_text_not_yet_sent() -> None:
    closed: list[str] = []
    steps = [(0, DeltaEvent("a")), (0.001, DeltaEvent("b")), (0.001, DeltaEvent("c")), (5, DONE)]
    coalescer = DeltaCoalescer(timed(*steps, closed=closed), interval=10.0, max_chars=64)
    assert await anext(coalescer) == DeltaEvent("a")
    waiting = asyncio.ensure_future(anext(coalescer))
    await asyncio.sleep(0.05)
    waiting.cancel()  # what cancelling the task that iterates does
    await asyncio.wait((waiting,))
    await coalescer.aclose()
    assert closed == ["closed"]
    assert coalescer.take_pending_text() == "bc"
    assert [e async for e in coalescer] == []


async def test_interval_zero_sends_every_piece() -> None:
    steps = [(0.001, DeltaEvent(str(i))) for i in range(20)]
    events = await collect(DeltaCoalescer(timed(*steps), interval=0, max_chars=64))
    assert texts(events) == [str(i) for i in range(20)]
