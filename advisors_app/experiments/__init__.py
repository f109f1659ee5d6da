"""Experiments and guarded rollouts between chain versions (issue 37).

``assignment`` (the pure split and targeting rules), ``serving`` (the turn's arm, from a plan
cached per process), ``editing`` (the rules, as field errors), ``status`` (start / pause /
stop), ``lifecycle`` (conclude through the promotion path), ``results`` (per-arm figures in one
query), ``stats`` (intervals, the sequential test), ``guardrails`` (the checks a task worker
runs), ``ramps``, ``timeline`` (per day, for charts), ``signals``. See docs/experiments.md.
"""
