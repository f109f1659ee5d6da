"""Rolling aggregates of online scores: per chain version, experiment arm and score key, the
mean of the last ``last`` numeric (and boolean: pass rate) online scores — what the admin shows
on a rule's page."""

from __future__ import annotations

from typing import Any

from django.db.models import CharField, F, Value, Window
from django.db.models.functions import Coalesce, RowNumber

from advisors_app.models import Score

__all__ = ["rolling_means"]


def rolling_means(chain_slug: str, last: int = 100) -> list[dict[str, Any]]:
    """``[{"version", "arm", "key", "n", "mean"}]`` over the last ``last`` online scores of each
    (version, arm, key) of chain ``chain_slug`` (one statement; categorical scores left out),
    ordered by version, arm and key."""
    # "" without an arm, or once the call log is deleted.
    arm = Coalesce(F("call_log__experiment_arm"), Value(""), output_field=CharField())
    rows = (
        Score.objects.filter(
            source=Score.Source.ONLINE, chain_slug=chain_slug, numeric_value__isnull=False
        )
        .annotate(
            arm=arm,
            position=Window(
                RowNumber(),
                partition_by=[F("chain_version_id"), arm, F("key")],
                order_by=[F("created_at").desc(), F("pk").desc()],
            ),
        )
        .filter(position__lte=last)
        .values_list("chain_version__number", "arm", "key", "numeric_value")
    )
    groups: dict[tuple[Any, str, str], list[float]] = {}
    for version, arm_name, key, value in rows:
        groups.setdefault((version, arm_name or "", key), []).append(value)
    return [
        {"version": v, "arm": a, "key": k, "n": len(vals), "mean": round(sum(vals) / len(vals), 6)}
        for (v, a, k), vals in sorted(
            groups.items(), key=lambda item: (item[0][0] or 0, *item[0][1:])
        )
    ]
