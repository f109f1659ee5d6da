"""Creating and changing experiments: every rule checked at once, as field errors.

:func:`create_experiment` and :func:`update_experiment` take the REST body's shape —
``{"name", "label", "unit", "arms": [{"name", "version", "weight"}], "guardrails": [{"metric",
"max"|"min"}], "targeting"}`` (``version``: a version number of the chain) — and raise
:class:`ExperimentError` with every field's messages (``arms``, ``arms.1.version``,
``guardrails.0.metric``, ...). The admin's forms check the same rules (:func:`arm_errors`,
:func:`guardrail_errors`, :func:`~.assignment.rule_errors`). While an experiment runs or is
paused its arms keep their versions (only weights change: a conversation keeps its arm by its
version); every change bumps ``revision``, which every process sees on its next turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction

from advisors_app.conf import app_settings
from advisors_app.exceptions import Refusal
from advisors_app.experiments.assignment import rule_errors
from advisors_app.experiments.ramps import ramp_errors
from advisors_app.experiments.results import METRICS
from advisors_app.models import AdvisorChain, ChainVersion, Experiment, ExperimentArm
from advisors_app.models.experiments import BASIS_POINTS
from advisors_app.models.versions import LABEL_NAME_VALIDATOR

__all__ = [
    "ExperimentError",
    "arm_errors",
    "create_experiment",
    "guardrail_errors",
    "update_experiment",
]

FieldErrors = dict[str, list[str]]


class ExperimentError(Refusal, ValueError):
    """Raised when an experiment cannot be created, changed or moved to a status (400
    ``invalid`` with field errors; 409 ``conflict`` for a status that does not allow it)."""


def arm_errors(chain: AdvisorChain, arms: Any) -> tuple[FieldErrors, list[tuple[str, Any, int]]]:
    """The field errors of ``arms`` (``[{"name", "version", "weight"}]`` with a version
    number or a :class:`ChainVersion`), and the arms as ``(name, version row, weight)``."""
    if not isinstance(arms, list) or len(arms) < 2:
        return {"arms": ["Give at least two arms: the first is the control."]}, []
    errors: FieldErrors = {}
    parsed = []
    numbers = [arm.get("version") for arm in arms if isinstance(arm, dict)]
    wanted = [n for n in numbers if isinstance(n, int) and not isinstance(n, bool)]
    versions = {v.number: v for v in chain.versions.filter(number__in=wanted)}
    for at, arm in enumerate(arms):
        where = f"arms.{at}"
        if not isinstance(arm, dict):
            errors[where] = ["Enter an object with name, version and weight."]
            continue
        name, version, weight = arm.get("name"), arm.get("version"), arm.get("weight")
        if not isinstance(name, str) or not name or len(name) > 100:
            errors[f"{where}.name"] = ["Name the arm (at most 100 characters)."]
        if isinstance(version, ChainVersion):
            if version.chain_id != chain.pk:
                errors[f"{where}.version"] = [
                    f"v{version.number} is a version of another chain, not of {chain.slug!r}."
                ]
        elif version in versions:
            version = versions[version]
        else:
            errors[f"{where}.version"] = [f"Chain {chain.slug!r} has no version {version!r}."]
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            errors[f"{where}.weight"] = ["Enter a weight in basis points (0 to 10000)."]
            weight = 0
        parsed.append((name, version, weight))
    names = [name for name, _, _ in parsed]
    if len(set(names)) != len(names):
        errors.setdefault("arms", []).append("Give each arm its own name.")
    chosen = [getattr(version, "pk", version) for _, version, _ in parsed]
    if len(set(chosen)) != len(chosen):
        errors.setdefault("arms", []).append("Give each arm its own version.")
    total = sum(weight for _, _, weight in parsed)
    if total != BASIS_POINTS:
        errors.setdefault("arms", []).append(
            f"The weights must sum to {BASIS_POINTS} basis points (100 %); they sum to {total}."
        )
    return errors, parsed


def guardrail_errors(guardrails: Any) -> FieldErrors:
    """The field errors of ``guardrails`` (``[{"metric", "max"|"min"}]``)."""
    if not isinstance(guardrails, list):
        return {"guardrails": ["Enter a list of guardrails."]}
    errors: FieldErrors = {}
    for at, rail in enumerate(guardrails):
        where = f"guardrails.{at}"
        if not isinstance(rail, dict):
            errors[where] = ['Enter an object: {"metric", "max" or "min"}.']
            continue
        if rail.get("metric") not in METRICS:
            errors[f"{where}.metric"] = [
                f"Unknown metric {rail.get('metric')!r}; one of {', '.join(sorted(METRICS))}."
            ]
        bounds = [key for key in ("max", "min") if key in rail]
        value = rail.get(bounds[0]) if len(bounds) == 1 else None
        if len(bounds) != 1 or isinstance(value, bool) or not isinstance(value, int | float):
            errors[f"{where}"] = [
                "Give one bound, 'max' or 'min': a number, the difference arm − control allowed."
            ]
    return errors


def _scalar_errors(data: Mapping[str, Any], partial: bool) -> FieldErrors:
    errors: FieldErrors = {}
    if not partial or "name" in data:
        name = data.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            errors["name"] = ["Name the experiment (at most 200 characters)."]
    if "label" in data:
        label = data["label"]
        try:
            LABEL_NAME_VALIDATOR(label)
        except Exception:
            errors["label"] = [f"{label!r} is not a label name."]
    if "unit" in data and data["unit"] not in Experiment.Unit.values:
        errors["unit"] = [f"Choose one of {', '.join(Experiment.Unit.values)}."]
    elif data.get("unit") == Experiment.Unit.TENANT and not app_settings.TENANT_RESOLVER:
        errors["unit"] = ['"tenant" needs ADVISORS["TENANT_RESOLVER"]: none is configured.']
    return errors


def _checked(
    chain: AdvisorChain, data: Mapping[str, Any], current: Experiment | None
) -> list[tuple[str, Any, int]] | None:
    """Raise every field error of ``data``; the parsed arms when ``data`` has arms."""
    errors = _scalar_errors(data, partial=current is not None)
    parsed = None
    if current is None or "arms" in data:
        arm_problems, parsed = arm_errors(chain, data.get("arms"))
        errors.update(arm_problems)
    if "guardrails" in data:
        errors.update(guardrail_errors(data["guardrails"]))
    if "ramp" in data:
        problems = ramp_errors(data["ramp"])
        if problems:
            errors["ramp"] = problems
    if "targeting" in data:
        names = [name for name, _, _ in parsed] if parsed else _arm_names(current)
        problems = rule_errors(data["targeting"], names)
        if problems:
            errors["targeting"] = problems
    if errors:
        raise ExperimentError("The experiment is invalid.", fields=errors)
    return parsed


def _arm_names(experiment: Experiment | None) -> list[str]:
    if experiment is None:
        return []
    return list(experiment.arms.values_list("name", flat=True))


def _write_arms(experiment: Experiment, parsed: Sequence[tuple[str, Any, int]]) -> None:
    experiment.arms.all().delete()
    ExperimentArm.objects.bulk_create(
        ExperimentArm(experiment=experiment, name=n, version=v, weight=w, position=at)
        for at, (n, v, w) in enumerate(parsed)
    )


def create_experiment(chain: AdvisorChain, data: Mapping[str, Any], *, user: Any) -> Experiment:
    """A draft experiment from the REST body's shape; raises :class:`ExperimentError`."""
    parsed = _checked(chain, data, None)
    assert parsed is not None
    with transaction.atomic():
        experiment = Experiment.objects.create(
            chain=chain,
            name=data["name"].strip(),
            label=data.get("label") or "production",
            unit=data.get("unit") or Experiment.Unit.USER,
            guardrails=list(data.get("guardrails") or []),
            targeting=list(data.get("targeting") or []),
            ramp=dict(data.get("ramp") or {}),
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        _write_arms(experiment, parsed)
    return experiment


def update_experiment(experiment: Experiment, data: Mapping[str, Any]) -> Experiment:
    """Change what ``data`` names (a PATCH); raises :class:`ExperimentError`. A running or
    paused experiment changes its weights, guardrails, targeting and name, not its label,
    unit or arms' versions; a stopped or concluded one changes nothing."""
    status = experiment.status
    if status in (Experiment.Status.STOPPED, Experiment.Status.CONCLUDED):
        raise ExperimentError(
            f"A {status} experiment cannot change.", code="conflict", http_status=409
        )
    parsed = _checked(experiment.chain, data, experiment)
    active = status in Experiment.ACTIVE
    if active:
        fixed = [
            key
            for key in ("label", "unit")
            if key in data and data[key] != getattr(experiment, key)
        ]
        if fixed:
            raise ExperimentError(
                "A running or paused experiment keeps its label and unit.",
                fields={key: ["Stop the experiment to change this."] for key in fixed},
            )
        if parsed is not None:
            arms = list(experiment.arms.order_by("position"))
            same = [(a.name, a.version_id) for a in arms] == [(n, v.pk) for n, v, _ in parsed]
            if not same:
                raise ExperimentError(
                    "A running or paused experiment keeps its arms and their versions.",
                    fields={"arms": ["Only the weights may change while it runs."]},
                )
    with transaction.atomic():
        for key in ("name", "label", "unit", "guardrails", "targeting", "ramp"):
            if key in data:
                setattr(experiment, key, data[key].strip() if key == "name" else data[key])
        experiment.save()
        if parsed is not None:
            if active:
                for arm, (_, _, weight) in zip(
                    experiment.arms.order_by("position"), parsed, strict=True
                ):
                    ExperimentArm.objects.filter(pk=arm.pk).update(weight=weight)
            else:
                _write_arms(experiment, parsed)
        experiment.touch()
    return experiment
