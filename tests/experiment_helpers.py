"""Rows for experiment tests: a chain with two versions answering apart, and an experiment."""

from __future__ import annotations

from typing import Any

from advisors_app.definition import publish
from advisors_app.models import AdvisorChain, Experiment, ExperimentArm
from tests.factories import make_chain, scripted_model


def two_version_chain(slug: str = "exp", **fields: Any) -> AdvisorChain:
    """Version 1 answers "one" (``production``); version 2 answers "two" (no label)."""
    chain = make_chain(slug, model=scripted_model(f"{slug}-one", responses=("one",)), **fields)
    chain.chat_model = scripted_model(f"{slug}-two", responses=("two",))
    chain.save()
    publish(chain, message="answers two")
    return chain


def make_experiment(
    chain: AdvisorChain,
    arms: tuple[tuple[str, int, int], ...] = (("control", 1, 5000), ("treatment", 2, 5000)),
    *,
    status: str = Experiment.Status.RUNNING,
    **fields: Any,
) -> Experiment:
    """An experiment on ``chain``'s ``production`` with ``(name, version number, weight)``
    arms, the first the control."""
    experiment = Experiment.objects.create(
        chain=chain, name=fields.pop("name", "test"), status=status, **fields
    )
    for position, (name, number, weight) in enumerate(arms):
        ExperimentArm.objects.create(
            experiment=experiment,
            name=name,
            version=chain.versions.get(number=number),
            weight=weight,
            position=position,
        )
    return experiment


def tenant_of(user: Any) -> str | None:
    """A tenant resolver for tests: ``acme-*`` users are tenant ``acme``, others have none."""
    return "acme" if user.username.startswith("acme-") else None
