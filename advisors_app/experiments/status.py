"""An experiment's status: start, pause, stop — each recorded as an
:class:`~advisors_app.models.ExperimentEvent` with who and why, each bumping the revision every
process's turns read (:mod:`.serving`). Concluding, which moves the label, is in
:mod:`.lifecycle`.

============  ==================  =========================================================
action        from                what turns get afterwards
============  ==================  =========================================================
start         draft, paused       their arm; refused while another experiment of the label
                                  runs or is paused (field error on ``label``), and to a
                                  user who may not move the label (403: an experiment
                                  serves its candidates on that label, as a promotion would)
pause         running             the control arm's version, every unit (pinned too)
stop          running, paused     the label's version (the experiment no longer applies)
============  ==================  =========================================================
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from advisors_app.definition import can_move_label
from advisors_app.experiments.editing import ExperimentError
from advisors_app.experiments.signals import experiment_paused
from advisors_app.models import Experiment, ExperimentEvent

__all__ = ["change_status", "pause", "require_label_right", "start", "stop"]

Status = Experiment.Status

_ALLOWED = {
    Status.RUNNING: (Status.DRAFT, Status.PAUSED),
    Status.PAUSED: (Status.RUNNING,),
    Status.STOPPED: (Status.RUNNING, Status.PAUSED),
    Status.CONCLUDED: (Status.RUNNING, Status.PAUSED, Status.STOPPED),
}


def _actor(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None


def change_status(
    experiment: Experiment,
    to: str,
    *,
    user: Any = None,
    reason: str = "",
    detail: dict[str, Any] | None = None,
    expect: str | None = None,
) -> bool:
    """Move ``experiment`` to status ``to`` in the caller's transaction (or its own), recorded;
    ``False`` when ``expect`` is given and the stored status is no longer it (a concurrent
    change won). Raises :class:`ExperimentError` (409) when the status does not allow it, and
    (400, field ``label``) when another experiment of the label runs or is paused."""
    with transaction.atomic():
        locked = Experiment.objects.select_for_update().get(pk=experiment.pk)
        if expect is not None and locked.status != expect:
            return False
        if locked.status not in _ALLOWED[Status(to)]:
            raise ExperimentError(
                f"A {locked.status} experiment cannot become {to}.",
                code="conflict",
                http_status=409,
            )
        before = locked.status
        locked.status = to
        now = timezone.now()
        if to == Status.RUNNING and locked.started_at is None:
            locked.started_at = locked.step_started_at = now
        if to in (Status.STOPPED, Status.CONCLUDED):
            locked.ended_at = now
        try:
            with transaction.atomic():
                locked.save()
        except IntegrityError:
            other = (
                Experiment.objects.filter(
                    chain_id=locked.chain_id, label=locked.label, status__in=Experiment.ACTIVE
                )
                .exclude(pk=locked.pk)
                .first()
            )
            message = (
                f"Experiment {other.name!r} is already {other.status} on label "
                f"{locked.label!r}: stop it first."
                if other
                else f"Another experiment is active on label {locked.label!r}."
            )
            raise ExperimentError(message, fields={"label": [message]}) from None
        locked.touch()
        ExperimentEvent.objects.create(
            experiment=locked,
            from_status=before,
            to_status=to,
            actor=_actor(user),
            reason=reason[:500],
            detail=detail or {},
        )
        if to == Status.PAUSED:
            transaction.on_commit(
                lambda: experiment_paused.send(
                    Experiment,
                    experiment=locked,
                    reason=reason,
                    automatic=user is None,
                    detail=detail or {},
                )
            )
    for field in ("status", "started_at", "ended_at", "revision", "updated_at"):
        setattr(experiment, field, getattr(locked, field))
    return True


def require_label_right(user: Any, label: str, doing: str) -> None:
    """Refuse (403) a ``user`` who may not move ``label``: starting an experiment serves its
    candidates' versions on the label and concluding moves it, so both need the right a
    promotion needs (``change_chainlabel``; ``production`` also ``promote_production``).
    ``user=None`` is the project's own code (tasks, the Python API without a user)."""
    if user is None or can_move_label(user, label):
        return
    needs = "change_chainlabel" + (" and promote_production" if label == "production" else "")
    raise ExperimentError(
        f"{doing} serves versions on label {label!r}: it needs the advisors_app.{needs} "
        "permission.",
        code="permission_denied",
        http_status=403,
    )


def start(experiment: Experiment, *, user: Any = None, reason: str = "") -> Experiment:
    require_label_right(user, experiment.label, "Starting an experiment")
    change_status(experiment, Status.RUNNING, user=user, reason=reason or "started")
    return experiment


def pause(experiment: Experiment, *, user: Any = None, reason: str = "") -> Experiment:
    change_status(experiment, Status.PAUSED, user=user, reason=reason or "paused")
    return experiment


def stop(experiment: Experiment, *, user: Any = None, reason: str = "") -> Experiment:
    change_status(experiment, Status.STOPPED, user=user, reason=reason or "stopped")
    return experiment
