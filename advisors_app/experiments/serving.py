"""The turn's arm: the ``assign`` stage's hook, and the plans it reads, cached per process.

The turn's one version read (:mod:`advisors_app.definition.runtime`) also returns
``"<id>:<revision>"`` of the label's running or paused experiment (``ChainTarget.experiment``).
That stamp names a :class:`Plan` — the experiment's arms, weights, salt and rules — built once per
process on a miss (two queries) and cached like compiled chains: every change bumps the revision,
so a process sees it on its next turn and there is nothing to invalidate. A turn served from the
cache adds no SQL statement (a ``groups`` targeting rule asks one when a turn reaches it).

:func:`assign`:

* a **paused** experiment serves every unit the control arm's version, pinned conversations too
  (a tripped guardrail sends everyone back); nothing is recorded as the experiment's;
* a **running** one keeps a conversation on the arm whose version it started on (it started on
  it: :func:`~advisors_app.memory.conversations.create_conversation` records the version served);
  a conversation started before the experiment on another version stays there when the chain
  pins versions; every other turn gets the first matching targeting rule's arm, else the arm of
  its unit's bucket (:mod:`.assignment`).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from advisors_app.definition.runtime import ChainTarget
from advisors_app.experiments.assignment import arm_at, bucket, matches
from advisors_app.experiments.ramps import effective_weights
from advisors_app.models import Experiment, ExperimentArm
from advisors_app.stores.scoped import user_tenant

__all__ = ["ArmPlan", "Plan", "assign", "clear_plans", "plan_of"]

#: Plans kept per process (least recently used dropped first).
CACHE_SIZE = 64


@dataclass(frozen=True, slots=True)
class ArmPlan:
    """One arm as a turn needs it: its version's ids and its cumulative weight bound."""

    name: str
    version_id: int
    number: int
    snapshot_hash: str
    upper: int


@dataclass(frozen=True, slots=True)
class Plan:
    """An experiment as a turn needs it; ``arms[0]`` is the control."""

    id: int
    status: str
    unit: str
    salt: str
    arms: tuple[ArmPlan, ...]
    rules: tuple[dict[str, Any], ...]

    @property
    def uppers(self) -> tuple[int, ...]:
        return tuple(arm.upper for arm in self.arms)

    def arm_of_version(self, version_id: int | None) -> ArmPlan | None:
        return next((arm for arm in self.arms if arm.version_id == version_id), None)

    def arm_named(self, name: str) -> ArmPlan | None:
        return next((arm for arm in self.arms if arm.name == name), None)


def load_plan(experiment_id: int) -> Plan:
    """Blocking, two queries: the experiment's plan as stored now (deleted since the turn's
    read: a plan without arms, which serves the label's version)."""
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    if experiment is None:
        return Plan(experiment_id, Experiment.Status.STOPPED, Experiment.Unit.USER, "", (), ())
    rows = list(
        ExperimentArm.objects.filter(experiment_id=experiment_id)
        .order_by("position")
        .values_list("name", "weight", "version_id", "version__number", "version__snapshot_hash")
    )
    weights = effective_weights([row[1] for row in rows], experiment.ramp, experiment.ramp_step)
    arms, upper = [], 0
    for (name, _, version_id, number, snapshot_hash), weight in zip(rows, weights, strict=True):
        upper += weight
        arms.append(ArmPlan(name, version_id, number, snapshot_hash, upper))
    return Plan(
        experiment.pk,
        experiment.status,
        experiment.unit,
        experiment.salt,
        tuple(arms),
        tuple(experiment.targeting or ()),
    )


_plans: OrderedDict[str, Plan] = OrderedDict()
_lock = threading.Lock()


def plan_of(stamp: str) -> Plan:
    """The plan ``stamp`` (``"<id>:<revision>"``) names, from this process's cache or read."""
    with _lock:
        found = _plans.get(stamp)
        if found is not None:
            _plans.move_to_end(stamp)
            return found
    plan = load_plan(int(stamp.partition(":")[0]))
    with _lock:
        _plans[stamp] = plan
        while len(_plans) > CACHE_SIZE:
            _plans.popitem(last=False)
    return plan


def clear_plans() -> None:
    """Drop this process's plans (they are read again on their next turn)."""
    with _lock:
        _plans.clear()


def unit_key(plan: Plan, user: Any, conversation: Any, conversation_id: str | None) -> str:
    """The key the unit is hashed by: the user, their tenant, or the conversation (a new
    conversation without an id of the caller's gets a random key: it keeps its arm by its
    version afterwards)."""
    if plan.unit == Experiment.Unit.USER:
        return f"user:{user.pk}"
    if plan.unit == Experiment.Unit.TENANT:
        # A user without a tenant is a unit of their own (blocking: the resolver may query).
        tenant = user_tenant(user)
        return f"tenant:{tenant}" if tenant is not None else f"user:{user.pk}"
    if conversation is not None:
        return f"conversation:{conversation.pk}"
    return f"new:{conversation_id or uuid.uuid4().hex}"


def arm_for(plan: Plan, user: Any, params: Any, key: str) -> ArmPlan:
    """The arm of a unit not yet on one: the first matching targeting rule's, else its bucket's."""
    for rule in plan.rules:
        if matches(rule, user, params or {}):
            arm = plan.arm_named(rule["arm"])
            if arm is not None:
                return arm
    return plan.arms[arm_at(plan.uppers, bucket(plan.salt, key))]


def _serve(target: ChainTarget, arm: ArmPlan, served_by: tuple[int, str] | None) -> ChainTarget:
    return replace(
        target,
        version_id=arm.version_id,
        number=arm.number,
        snapshot_hash=arm.snapshot_hash,
        arm=served_by,
    )


def assign(assignment: Any) -> ChainTarget:
    """The ``assign`` stage's hook (see the module docstring): ``assignment`` is a
    :class:`~advisors_app.turn.state.Assignment`."""
    target: ChainTarget = assignment.target
    stamp = assignment.asked.experiment
    if not stamp:
        return target
    plan = plan_of(stamp)
    if not plan.arms:
        return target
    if plan.status != Experiment.Status.RUNNING:
        return _serve(target, plan.arms[0], None)
    stored = assignment.conversation
    arm = plan.arm_of_version(stored.chain_version_id) if stored is not None else None
    if arm is None:
        if stored is not None and target.version_id != assignment.asked.version_id:
            return target  # pinned to a version the experiment does not serve
        data = assignment.input
        key = unit_key(plan, assignment.user, stored, data.conversation_id)
        arm = arm_for(plan, assignment.user, data.params, key)
    return _serve(target, arm, (plan.id, arm.name))
