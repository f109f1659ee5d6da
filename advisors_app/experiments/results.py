"""An experiment's figures per arm, in one SQL statement, with 95 % intervals and the
difference of each arm to the control (:mod:`.stats`).

Per arm: ``turns``, ``conversations``, ``error_rate``, ``refusal_rate`` (turns a guard or
SafeGuard blocked: finish reason ``CONTENT_FILTER``), ``latency_ms`` and
``time_to_first_token_ms`` (``p50``, ``p95`` by ``percentile_cont``, and the mean with its
interval; streams only for the latter), ``tokens_per_turn``, ``cost_per_turn`` (turns with a
known price), ``thumbs_up_rate`` (the users' ``thumbs`` votes) and ``scores`` (the mean of every
numeric or boolean score key of the arm's turns). Every figure but the counts and percentiles is
``{"value", "low", "high", "n"}`` plus, for the other arms, ``"vs_control": {"value", "low",
"high", "significant"}``.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from advisors_app.experiments.stats import Estimate, difference, mean_estimate, rate_estimate
from advisors_app.models import CallLog, Experiment, Score

__all__ = ["METRICS", "arm_figures", "results"]

#: The metrics a guardrail may bound: kind (``rate`` or ``mean``) by name.
METRICS = {
    "error_rate": "rate",
    "refusal_rate": "rate",
    "thumbs_up_rate": "rate",
    "latency_ms": "mean",
    "time_to_first_token_ms": "mean",
    "tokens_per_turn": "mean",
    "cost_per_turn": "mean",
}

_LOG, _SCORE = CallLog._meta.db_table, Score._meta.db_table
_SQL = f"""
SELECT
    log.experiment_arm,
    count(*),
    count(DISTINCT log.conversation_id),
    count(*) FILTER (WHERE log.status = 'error'),
    count(*) FILTER (WHERE log.finish_reason = 'CONTENT_FILTER'),
    percentile_cont(0.5) WITHIN GROUP (ORDER BY log.latency) * 1000,
    percentile_cont(0.95) WITHIN GROUP (ORDER BY log.latency) * 1000,
    avg(log.latency) * 1000,
    stddev_samp(log.latency) * 1000,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY log.time_to_first_token) * 1000,
    percentile_cont(0.95) WITHIN GROUP (ORDER BY log.time_to_first_token) * 1000,
    avg(log.time_to_first_token) * 1000,
    stddev_samp(log.time_to_first_token) * 1000,
    count(log.time_to_first_token),
    avg((log.usage ->> 'total_tokens')::float),
    stddev_samp((log.usage ->> 'total_tokens')::float),
    count(log.usage ->> 'total_tokens'),
    avg(log.total_cost)::float,
    stddev_samp(log.total_cost)::float,
    count(log.total_cost),
    (
        SELECT coalesce(json_agg(json_build_array(k.key, k.mean, k.sd, k.n, k.ones)), '[]')
        FROM (
            SELECT score.key, avg(score.numeric_value) AS mean,
                   stddev_samp(score.numeric_value) AS sd, count(*) AS n,
                   count(*) FILTER (WHERE score.value_type = 'boolean'
                                    AND score.numeric_value = 1) AS ones
            FROM {_SCORE} score JOIN {_LOG} scored ON scored.id = score.call_log_id
            WHERE scored.experiment_id = %(experiment)s
              AND scored.experiment_arm = log.experiment_arm
              AND score.numeric_value IS NOT NULL
            GROUP BY score.key
        ) k
    )
FROM {_LOG} log
WHERE log.experiment_id = %(experiment)s
GROUP BY log.experiment_arm
"""


def arm_figures(experiment_id: int) -> dict[str, dict[str, Any]]:
    """Blocking, one statement: the raw figures of each arm that served a turn, by arm name:
    counts, percentiles and :class:`~.stats.Estimate` values."""
    with connection.cursor() as cursor:
        cursor.execute(_SQL, {"experiment": experiment_id})
        rows = cursor.fetchall()
    figures = {}
    for row in rows:
        (arm, turns, conversations, errors, refusals, p50, p95, lat_mean, lat_sd) = row[:9]
        (t50, t95, ttft_mean, ttft_sd, ttft_n, tok_mean, tok_sd, tok_n) = row[9:17]
        (cost_mean, cost_sd, cost_n, scores) = row[17:21]
        votes = next((s for s in scores if s[0] == "thumbs"), None)
        figures[arm] = {
            "turns": turns,
            "conversations": conversations,
            "error_rate": rate_estimate(errors, turns),
            "refusal_rate": rate_estimate(refusals, turns),
            "latency_ms": mean_estimate(lat_mean, lat_sd, turns),
            "latency_percentiles": {"p50": p50, "p95": p95},
            "time_to_first_token_ms": mean_estimate(ttft_mean, ttft_sd, ttft_n),
            "time_to_first_token_percentiles": {"p50": t50, "p95": t95},
            "tokens_per_turn": mean_estimate(tok_mean, tok_sd, tok_n),
            "cost_per_turn": mean_estimate(cost_mean, cost_sd, cost_n),
            "thumbs_up_rate": rate_estimate(votes[4], votes[3]) if votes else rate_estimate(0, 0),
            "scores": {key: mean_estimate(mean, sd, n) for key, mean, sd, n, _ in scores},
        }
    return figures


def _compared(value: Estimate, control: Estimate | None) -> dict[str, Any]:
    shown: dict[str, Any] = value.to_dict()
    if control is not None:
        shown["vs_control"] = difference(value, control)
    return shown


def results(experiment: Experiment) -> dict[str, Any]:
    """``GET /api/experiments/<id>/results/``: every arm (in order, the control first, with
    zeros for an arm that served nothing yet), its figures and their differences to the
    control. Blocking: one statement (plus the arms', when not prefetched)."""
    figures = arm_figures(experiment.pk)
    arms = list(experiment.arms.all())
    control = figures.get(arms[0].name) if arms else None
    shown = []
    for arm in arms:
        own = figures.get(arm.name)
        entry: dict[str, Any] = {
            "arm": arm.name,
            "version": arm.version.number,
            "weight": arm.weight,
            "control": arm.is_control,
            "turns": own["turns"] if own else 0,
            "conversations": own["conversations"] if own else 0,
        }
        against = None if arm.is_control or control is None else control
        for metric in METRICS:
            value = own[metric] if own else Estimate(None, None, None, 0, None)
            entry[metric] = _compared(value, against[metric] if against else None)
        if own:
            entry["latency_ms"].update(own["latency_percentiles"])
            entry["time_to_first_token_ms"].update(own["time_to_first_token_percentiles"])
        scores = own["scores"] if own else {}
        control_scores = against["scores"] if against else {}
        entry["scores"] = {
            key: _compared(value, control_scores.get(key) if against else None)
            for key, value in sorted(scores.items())
        }
        shown.append(entry)
    return {"experiment": experiment.pk, "status": experiment.status, "arms": shown}
