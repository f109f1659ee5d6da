"""An experiment's figures over time, per arm and day, for the admin's charts: one statement.

:func:`timeline` answers ``{"days": [date, ...], "arms": {name: {"turns": [...],
"error_rate": [...]}}}`` (a day an arm served nothing: 0 turns, ``None`` rate), and
:func:`svg_chart` draws one series per arm as an inline SVG polyline (no script, no asset).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils.html import format_html, format_html_join

from advisors_app.models import CallLog, Experiment

__all__ = ["svg_chart", "timeline"]

#: Colours of the arms' lines, the control first.
COLOURS = ("#417690", "#c4561d", "#3a8f3a", "#8a3ab9", "#b9a13a")


def timeline(experiment: Experiment) -> dict[str, Any]:
    """Blocking, one statement: turns and error rate per arm and day."""
    rows = (
        CallLog.objects.filter(experiment=experiment)
        .annotate(day=TruncDate("created"))
        .values("day", "experiment_arm")
        .annotate(turns=Count("id"), errors=Count("id", filter=Q(status=CallLog.Status.ERROR)))
        .order_by("day")
    )
    by_day: dict[date, dict[str, tuple[int, int]]] = {}
    for row in rows:
        by_day.setdefault(row["day"], {})[row["experiment_arm"]] = (row["turns"], row["errors"])
    days = sorted(by_day)
    names = list(experiment.arms.order_by("position").values_list("name", flat=True))
    arms = {}
    for name in names:
        counts = [by_day[day].get(name, (0, 0)) for day in days]
        arms[name] = {
            "turns": [turns for turns, _ in counts],
            "error_rate": [errors / turns if turns else None for turns, errors in counts],
        }
    return {"days": days, "arms": arms}


def svg_chart(series: dict[str, list[float | None]], title: str, width: int = 480) -> str:
    """An inline SVG line chart of ``series`` (arm → values per day; ``None`` gaps skipped)."""
    height, pad = 120, 8
    values = [v for points in series.values() for v in points if v is not None]
    top = max(values, default=0) or 1
    length = max((len(points) for points in series.values()), default=0)
    step = (width - 2 * pad) / max(length - 1, 1)
    lines = []
    for index, (name, points) in enumerate(series.items()):
        coords = " ".join(
            f"{pad + at * step:.1f},{height - pad - (value / top) * (height - 2 * pad):.1f}"
            for at, value in enumerate(points)
            if value is not None
        )
        lines.append((COLOURS[index % len(COLOURS)], coords, name))
    polylines = format_html_join(
        "",
        '<polyline fill="none" stroke="{}" stroke-width="2" points="{}"><title>{}</title>'
        "</polyline>",
        lines,
    )
    legend = format_html_join(
        " ", '<span style="color:{}">■ {}</span>', ((c, n) for c, _, n in lines)
    )
    return format_html(
        '<figure><figcaption>{} (max {})</figcaption><svg width="{}" height="{}" role="img" '
        'aria-label="{}">{}</svg><div>{}</div></figure>',
        title,
        f"{top:.3g}",
        width,
        height,
        title,
        polylines,
        legend,
    )
