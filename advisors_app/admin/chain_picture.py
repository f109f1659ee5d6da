"""A picture of a chain (issue 24): the onion of its advisors, drawn from a snapshot as inline SVG.

Spring AI's advisor chain is an onion: the advisor with the smallest order is outermost — it
sees the request first and the response last — and the model call is the core. The picture
draws each enabled advisor of the snapshot as a ring, outermost first (the snapshot lists them in
execution order), with its position, type, order and roles, and two paths through it: ``call``
passes through every ``CallAdvisor``, ``stream`` through every ``StreamAdvisor`` (a dot where the
path enters the advisor, a gap where it skips it). When the snapshot enables tools and no
advisor is a tool loop, ``ChatClient`` registers a ``ToolCallingAdvisor`` at its default order:
it is drawn too, marked as added.

:func:`annotate` adds a turn's times from its call trace (``CallTrace.to_dict()``): each
advisor's time from entering it until its answer left (all its runs, summed: inside a tool loop
advisors run once per round) and its own share (without the advisors inside it). Trace entries no
ring stands for (an advisor a configuration installs with it, such as session memory's inner
turn advisor) are listed apart.

The geometry is computed here; ``admin/advisors_app/chain_picture.html`` writes the SVG (no
script, no network), with a ``<title>`` and a ``<desc>`` that says the same in words.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from advisors_app.core.advisor import LOWEST_PRECEDENCE, AdvisorRole, CallAdvisor, StreamAdvisor
from advisors_app.core.advisors.tool_calling import ToolCallingAdvisor
from advisors_app.definition import resolve_draft
from advisors_app.definition.registry import advisor_types
from advisors_app.models import AdvisorChain
from advisors_app.orders import format_order

__all__ = [
    "Layer",
    "Picture",
    "annotate",
    "chain_picture",
    "layer_names",
    "picture_context",
    "turn_picture",
]

#: Trace entry names of the model call at the core (``core.chain``'s last links).
_MODEL_ENTRIES = ("call", "stream")

# Geometry, in SVG user units (px at scale 1).
_WIDTH = 760
_BAND = 46  # a ring's top band: two lines of text
_FOOT = 12  # a ring's bottom band: where the response comes back out
_INSET = 14  # each ring sits this far inside its parent
_MODEL = 58
_TOP = 30  # room above the outermost ring for the path headings
_PATH_GAP = 56
_TIME_LINE = 16


@dataclass(frozen=True)
class Layer:
    """One advisor of the picture (``position`` 1 is outermost; 0 for a disabled row).

    ``call``/``stream``: whether the ``call``/``stream`` path passes through it (``None``: its
    type is not registered here, so unknown). ``added``: not a row — ``ChatClient`` adds it.
    ``total``/``own``/``runs``: from :func:`annotate` (seconds; ``None`` without a trace).
    """

    position: int
    key: str
    label: str
    order: int | None
    roles: tuple[str, ...]
    enabled: bool = True
    call: bool | None = None
    stream: bool | None = None
    added: bool = False
    total: float | None = None
    own: float | None = None
    runs: int = 0

    @property
    def order_text(self) -> str:
        return format_order(self.order) if self.order is not None else "-"

    @property
    def role(self) -> str:
        """The role the ring is coloured by (guard, memory, rag, tool, ... or ``other``)."""
        for role in _ROLE_PRECEDENCE:
            if role in self.roles:
                return role
        return "other"


_ROLE_PRECEDENCE = tuple(role.value for role in AdvisorRole)


@dataclass(frozen=True)
class Picture:
    """A chain's layers (enabled, outermost first), its disabled rows, its model and tools."""

    slug: str
    layers: tuple[Layer, ...]
    disabled: tuple[Layer, ...]
    model: str
    tools: tuple[str, ...]
    model_total: float | None = None
    model_runs: int = 0
    extras: tuple[dict[str, Any], ...] = field(default=())
    annotated: bool = False

    @property
    def unknown_paths(self) -> bool:
        """Whether some layer's type is not registered here (its paths are not known)."""
        return any(layer.call is None or layer.stream is None for layer in self.layers)


def _paths(key: str) -> tuple[bool | None, bool | None]:
    advisor_type = advisor_types.get(key)
    cls = advisor_type.advisor_class if advisor_type is not None else None
    if cls is None:
        return None, None
    return issubclass(cls, CallAdvisor), issubclass(cls, StreamAdvisor)


def _layer(position: int, row: Mapping[str, Any]) -> Layer:
    key = str(row.get("type", ""))
    advisor_type = advisor_types.get(key)
    call, stream = _paths(key)
    order = row.get("order")
    return Layer(
        position=position,
        key=key,
        label=advisor_type.label if advisor_type is not None else f"{key} (not registered)",
        order=order if isinstance(order, int) else None,
        roles=tuple(sorted(advisor_type.roles)) if advisor_type is not None else (),
        enabled=bool(row.get("enabled")),
        call=call,
        stream=stream,
    )


def _model_name(snapshot: Mapping[str, Any]) -> str:
    slug = snapshot.get("chat_model")
    if slug:
        return str(slug)
    default = snapshot.get("default_chat_model")
    return f"default ({default})" if default else "the default chat model"


def chain_picture(snapshot: Mapping[str, Any]) -> Picture:
    """The picture of ``snapshot`` (a chain version's or a draft's, see
    :mod:`advisors_app.definition.snapshot`)."""
    rows = [row for row in snapshot.get("advisors") or () if isinstance(row, Mapping)]
    enabled = [_layer(0, row) for row in rows if row.get("enabled")]
    tools = tuple(str(t.get("name")) for t in snapshot.get("tools") or () if isinstance(t, Mapping))
    if tools and not any(AdvisorRole.TOOL.value in layer.roles for layer in enabled):
        loop = Layer(
            position=0,
            key="tool_calling",
            label="Tool calling (added: the chain enables tools)",
            order=ToolCallingAdvisor.DEFAULT_ORDER,
            roles=(AdvisorRole.TOOL.value,),
            call=True,
            stream=True,
            added=True,
        )
        # Stable: the added loop goes after the rows of the same order, as ChatClient sorts.
        enabled = sorted([*enabled, loop], key=lambda layer: layer.order or 0)
    layers = tuple(replace(layer, position=n) for n, layer in enumerate(enabled, start=1))
    return Picture(
        slug=str(snapshot.get("slug", "")),
        layers=layers,
        disabled=tuple(_layer(0, row) for row in rows if not row.get("enabled")),
        model=_model_name(snapshot),
        tools=tools,
    )


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _match(entry: Mapping[str, Any], layers: tuple[Layer, ...]) -> int | None:
    """The index of the layer ``entry`` is a run of: same order, then the same class name."""
    same_order = [i for i, layer in enumerate(layers) if layer.order == entry.get("order")]
    if len(same_order) <= 1:
        return same_order[0] if same_order else None
    name = entry.get("name")
    for index in same_order:
        advisor_type = advisor_types.get(layers[index].key)
        cls = advisor_type.advisor_class if advisor_type is not None else None
        if cls is not None and cls.__name__ == name:
            return index
    return same_order[0]


def annotate(picture: Picture, trace: Mapping[str, Any] | None) -> Picture:
    """``picture`` with each layer's time from ``trace`` (``CallTrace.to_dict()``)."""
    entries = [e for e in (trace or {}).get("entries") or () if isinstance(e, Mapping)]
    totals = [[0.0, 0.0, 0] for _ in picture.layers]
    model_total, model_runs = 0.0, 0
    extras: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.get("name") in _MODEL_ENTRIES and entry.get("order") == LOWEST_PRECEDENCE:
            model_total += _number(entry.get("duration"))
            model_runs += 1
            continue
        index = _match(entry, picture.layers)
        if index is None:
            extra = extras.setdefault(
                str(entry.get("name")),
                {
                    "name": entry.get("name"),
                    "order": format_order(entry.get("order")),
                    "total": 0.0,
                },
            )
            extra["total"] += _number(entry.get("duration"))
            continue
        totals[index][0] += _number(entry.get("duration"))
        totals[index][1] += _number(entry.get("self_duration"))
        totals[index][2] += 1
    layers = tuple(
        replace(layer, total=total, own=own, runs=int(runs)) if runs else layer
        for layer, (total, own, runs) in zip(picture.layers, totals, strict=True)
    )
    return replace(
        picture,
        layers=layers,
        model_total=model_total if model_runs else None,
        model_runs=model_runs,
        extras=tuple(extras.values()),
        annotated=True,
    )


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1000:.1f} ms"


def _time_text(layer: Layer) -> str:
    if layer.runs == 0:
        return "did not run"
    runs = f" in {layer.runs} runs" if layer.runs > 1 else ""
    return f"{_ms(layer.total)}{runs} (own {_ms(layer.own)})"


def _path_mark(passes: bool | None) -> str:
    return {True: "passes", False: "skips", None: "unknown"}[passes]


def _sentence(picture: Picture) -> str:
    """The picture in words, for its ``<desc>``."""
    parts = []
    for layer in picture.layers:
        roles = f", {', '.join(layer.roles)}" if layer.roles else ""
        paths = [name for name, on in (("call", layer.call), ("stream", layer.stream)) if on]
        text = f"{layer.position}. {layer.label} (order {layer.order_text}{roles}"
        text += f"; {' and '.join(paths)})" if paths else ")"
        if picture.annotated:
            text += f": {_time_text(layer)}"
        parts.append(text)
    core = f"the chat model {picture.model}"
    if picture.annotated and picture.model_total is not None:
        core += f": {_ms(picture.model_total)}"
    if not parts:
        return f"No advisor: requests go straight to {core}."
    return (
        "From outermost to innermost (the request passes inwards, the response back out): "
        + "; ".join(parts)
        + f"; then {core}."
    )


_ids = itertools.count(1)


def picture_context(picture: Picture, *, caption: str = "") -> dict[str, Any]:
    """What ``chain_picture.html`` draws ``picture`` from: rings, paths and texts, with ids
    unique in the page (two pictures side by side in the playground compare)."""
    n = len(picture.layers)
    band = _BAND + (_TIME_LINE if picture.annotated else 0)  # a third line: the times
    height = _TOP + n * (band + _FOOT) + _MODEL + 10
    path_call = _WIDTH - n * _INSET - 2 * _PATH_GAP - 50
    path_stream = path_call + _PATH_GAP
    rings = []
    for i, layer in enumerate(picture.layers):
        x, y = i * _INSET + 1, _TOP + i * band
        rings.append(
            {
                "layer": layer,
                "x": x,
                "y": y,
                "width": _WIDTH - 2 * x,
                "height": height - 10 - y - i * _FOOT - 1,
                "text_x": x + 10,
                "line1_y": y + 18,
                "line2_y": y + 36,
                "line3_y": y + 54,
                "mark_y": y + 14,
                "time": _time_text(layer) if picture.annotated else "",
                "call": _path_mark(layer.call),
                "stream": _path_mark(layer.stream),
            }
        )
    model_x, model_y = n * _INSET + 1, _TOP + n * band
    uid = next(_ids)
    return {
        "picture": picture,
        "uid": f"chain-picture-{uid}",
        "caption": caption,
        "width": _WIDTH,
        "height": height,
        "rings": rings,
        "model": {
            "x": model_x,
            "y": model_y,
            "width": _WIDTH - 2 * model_x,
            "height": _MODEL,
            "text_x": model_x + 10,
            "line1_y": model_y + 22,
            "line2_y": model_y + 42,
            "time": (
                _ms(picture.model_total)
                + (f" in {picture.model_runs} calls" if picture.model_runs > 1 else "")
                if picture.annotated and picture.model_total is not None
                else ""
            ),
        },
        "path_call": path_call,
        "path_stream": path_stream,
        "path_end": model_y + 30,
        "description": _sentence(picture),
        "extras": [{**e, "time": _ms(e["total"])} for e in picture.extras],
    }


def layer_names(picture: Picture) -> list[str]:
    """The layers' type keys, outermost first (for tests and the compare view's summary)."""
    return [layer.key for layer in picture.layers]


def turn_picture(
    chain: AdvisorChain, version: int | None, trace: Mapping[str, Any] | None, caption: str = ""
) -> dict[str, Any]:
    """The picture of what a turn ran — ``version`` of ``chain`` (``None``: the draft, as saved
    now) — annotated with its ``trace``, ready for ``chain_picture.html``."""
    found = chain.versions.filter(number=version).first() if version is not None else None
    snapshot = found.snapshot if found is not None else resolve_draft(chain)
    return picture_context(annotate(chain_picture(snapshot), trace), caption=caption)
