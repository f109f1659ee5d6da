"""Signals of experiments.

``experiment_paused`` is sent once an experiment is paused (by hand or by a tripped
guardrail) and the pause is committed, with ``experiment`` (the row), ``reason`` (text),
``automatic`` (``True``: a guardrail) and ``detail`` (the guardrail check, else ``{}``).
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["experiment_paused"]

experiment_paused = Signal()
