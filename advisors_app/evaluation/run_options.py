"""What an evaluation run holds still and how often it asks: the chat options pinned on every
item and the repeats (issue 40, "A gate that does not flip").

A model samples: the same version scored 0.50 and then 0.75 on one dataset, so a gate of
"no regression" flipped at random. A run therefore pins, by default, what makes a model
deterministic where the provider allows it — :data:`PINNED_OPTIONS`, temperature 0 and a
seed, sent as the turn's ``params.options`` (llama.cpp's server, the embedded model included,
and OpenAI-compatible APIs take both; a provider that ignores ``seed`` still decodes greedily
at temperature 0). An item's own ``params.options`` win over the pinned ones: the dataset's
author asked for them. ``{}`` pins nothing (a provider that refuses ``temperature`` 0 — some
reasoning models do). With ``repeats`` > 1 every item runs that many times, the seed one
higher each time, so that a run at a temperature above 0 samples a new answer per repeat and
is still reproducible; the gate averages an item's repeats before it compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisors_app.models.evaluation import MAX_REPEATS
from advisors_app.validation import REQUEST_OPTIONS, chat_options_errors

__all__ = ["MAX_REPEATS", "PINNED_OPTIONS", "item_params", "run_option_problems"]

#: The chat options a run pins unless it is given others.
PINNED_OPTIONS: dict[str, Any] = {"temperature": 0, "seed": 0}
_MAX_SEED = 2**63 - 1


def run_option_problems(chat_options: Any, repeats: Any) -> list[str]:
    """What is wrong with a run's ``chat_options`` (request options only: those a turn's
    ``params.options`` may set) and ``repeats`` (1 to :data:`MAX_REPEATS`); empty: nothing."""
    problems = []
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        problems.append(f"repeats: give a whole number from 1 to {MAX_REPEATS}.")
    if not isinstance(chat_options, Mapping):
        return [*problems, "chat options: expected a JSON object."]
    errors = chat_options_errors(dict(chat_options), "chat options", REQUEST_OPTIONS)
    problems += [f"{field}: {' '.join(messages)}" for field, messages in errors.items()]
    seed, last = chat_options.get("seed"), repeats if isinstance(repeats, int) else 1
    if not errors and isinstance(seed, int) and seed + max(last, 1) - 1 > _MAX_SEED:
        problems.append("chat options.seed: the last repeat's seed (seed + repeats - 1) overflows.")
    return problems


def item_params(
    chat_options: Mapping[str, Any], params: Mapping[str, Any] | None, repeat: int
) -> dict[str, Any]:
    """An item's turn params for repeat ``repeat`` (from 0): the item's ``params`` with the
    run's pinned ``chat_options`` under its own ``options`` (the seed plus ``repeat``)."""
    merged = dict(params or {})
    if not chat_options:
        return merged
    pinned = dict(chat_options)
    if isinstance(pinned.get("seed"), int):
        pinned["seed"] += repeat
    merged["options"] = {**pinned, **(merged.get("options") or {})}
    return merged
