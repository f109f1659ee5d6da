"""Concluding an experiment: its label moves to the winner's version through the same path
as a manual promotion — the same permission (:func:`~advisors_app.definition.can_move_label`:
``change_chainlabel``, and ``promote_production`` for ``production``), the chain's promotion
gate (:func:`~advisors_app.evaluation.gate.gate_refusal`), and
:func:`~advisors_app.definition.move_label`, which records the move as a
:class:`~advisors_app.models.ChainLabelEvent` — then the experiment is concluded, in one
transaction.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from advisors_app.definition import move_label
from advisors_app.evaluation.gate import gate_refusal
from advisors_app.experiments.editing import ExperimentError
from advisors_app.experiments.status import change_status, require_label_right
from advisors_app.models import Experiment

__all__ = ["conclude"]


def conclude(experiment: Experiment, winner: Any, *, user: Any) -> Experiment:
    """Move the experiment's label to arm ``winner``'s version and conclude it.

    Raises :class:`ExperimentError`: 400 (field ``winner``) for an unknown arm, 403 without
    the permission to move the label, 409 when the promotion gate refuses the version or the
    status does not allow concluding."""
    arm = (
        experiment.arms.select_related("version").filter(name=winner).first()
        if isinstance(winner, str)
        else None
    )
    if arm is None:
        names = ", ".join(experiment.arms.values_list("name", flat=True))
        raise ExperimentError(
            "Name the winning arm.", fields={"winner": [f"Choose one of the arms: {names}."]}
        )
    label = experiment.label
    require_label_right(user, label, "Concluding an experiment")
    chain = experiment.chain
    refused = gate_refusal(chain, label, arm.version)
    if refused:
        raise ExperimentError(" ".join(refused), code="conflict", http_status=409)
    reason = f"experiment {experiment.name!r} concluded: arm {arm.name!r} won"
    with transaction.atomic():
        change_status(experiment, Experiment.Status.CONCLUDED, user=user, reason=reason)
        move_label(chain, label, arm.version, user=user, reason=reason[:500])
        Experiment.objects.filter(pk=experiment.pk).update(winner=arm.name)
    experiment.winner = arm.name
    return experiment
