"""Experiments and guarded rollouts between chain versions (issue 37).

``assignment`` (the pure split and targeting rules), ``serving`` (the turn's arm, from a plan
cached per process), ``lifecycle`` (validation, start / pause / stop / conclude), ``results``
(per-arm figures in one query), ``stats`` (intervals, the sequential test), ``guardrails`` (the
checks a task worker runs), ``ramps``, ``timeline`` (per day, for charts), ``signals``. See docs/experiments.md.
"""
