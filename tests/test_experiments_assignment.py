"""Assignment (issue 37): a pure, even split; the same arm for a unit in every process; targeting
rules and forced arms; a conversation keeps its arm; a paused experiment serves the control."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group

from advisors_app.experiments.assignment import arm_at, bucket, matches, rule_errors
from advisors_app.experiments.serving import clear_plans
from advisors_app.models import CallLog, ChatMessage, Experiment
from advisors_app.turn import call_turn
from tests.experiment_helpers import make_experiment, two_version_chain
from tests.live_server import ROOT


def _uppers(weights: list[int]) -> list[int]:
    total, uppers = 0, []
    for weight in weights:
        total += weight
        uppers.append(total)
    return uppers


@pytest.mark.parametrize("weights", [[9000, 1000], [5000, 3000, 2000], [100, 9900]])
def test_ten_thousand_units_split_within_two_points_of_the_weights(weights: list[int]) -> None:
    counts = Counter(arm_at(_uppers(weights), bucket("salt-1", f"user:{n}")) for n in range(10_000))
    for index, weight in enumerate(weights):
        assert abs(counts[index] / 10_000 - weight / 10_000) <= 0.02


def test_a_unit_gets_the_same_bucket_in_another_process() -> None:
    keys = [f"user:{n}" for n in range(50)]
    here = [bucket("s", key) for key in keys]
    code = (
        "from advisors_app.experiments.assignment import bucket;"
        f"print([bucket('s', k) for k in {keys!r}])"
    )
    # Another interpreter, another hash seed: no state of this process, no table.
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    ).stdout
    assert out.strip() == str(here)
    assert [bucket("s", key) for key in keys] == here  # and again here: a pure function


def test_a_param_rule_matches_equal_and_in() -> None:
    equal = {"arm": "b", "param": "region", "equals": "eu"}
    among = {"arm": "b", "param": "region", "in": ["eu", "uk"]}
    assert matches(equal, object(), {"region": "eu"})
    assert not matches(equal, object(), {"region": "us"})
    assert not matches({**equal, "equals": None}, object(), {})
    assert matches(among, object(), {"region": "uk"})
    assert not matches(among, object(), {})


def test_targeting_rules_are_checked() -> None:
    assert rule_errors([{"arm": "b", "users": ["qa"]}], ["a", "b"]) == []
    assert rule_errors([{"arm": "c", "users": ["qa"]}], ["a", "b"])
    assert rule_errors([{"arm": "b", "param": "x"}], ["a", "b"])
    assert rule_errors([{"arm": "b", "users": [], "groups": ["g"]}], ["a", "b"])
    assert rule_errors("nope", ["a"])


pytestmark_db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fresh(fresh_chain_cache: None) -> Iterator[None]:
    clear_plans()
    yield
    clear_plans()


@pytest.fixture
def users(django_user_model: Any) -> list[Any]:
    return [django_user_model.objects.create_user(f"u{n}", password="pw") for n in range(30)]


@pytestmark_db
@pytest.mark.usefixtures("fresh")
async def test_each_user_stays_on_one_arm_and_the_turn_records_it(users: list[Any]) -> None:
    chain = await _chain()
    experiment = await _experiment(chain)
    answers: dict[str, set[str]] = {}
    for user in users:
        for _ in range(2):
            outcome = await call_turn(chain.slug, user, "hi")
            answers.setdefault(user.username, set()).add(outcome.content)
            arm = {"one": "control", "two": "treatment"}[outcome.content]
            assert outcome.experiment == {"id": experiment.pk, "arm": arm}
            assert outcome.to_dict()["experiment"] == outcome.experiment
    assert all(len(seen) == 1 for seen in answers.values())
    assert {next(iter(seen)) for seen in answers.values()} == {"one", "two"}
    logs = [log async for log in CallLog.objects.all()]
    assert {(log.experiment_id, log.experiment_arm) for log in logs} == {
        (experiment.pk, "control"),
        (experiment.pk, "treatment"),
    }
    version_of = {"control": 1, "treatment": 2}
    async for log in CallLog.objects.select_related("chain_version"):
        assert log.chain_version.number == version_of[log.experiment_arm]
    reply = await ChatMessage.objects.filter(message_type="assistant").afirst()
    assert reply.metadata["experiment"]["id"] == experiment.pk


@pytestmark_db
@pytest.mark.usefixtures("fresh")
async def test_a_conversation_keeps_its_arm_when_the_weights_change(users: list[Any]) -> None:
    chain = await _chain()
    experiment = await _experiment(chain, weights=(10_000, 0))
    user = users[0]
    first = await call_turn(chain.slug, user, "hi")
    assert first.experiment["arm"] == "control"
    await _reweigh(experiment, (0, 10_000))
    later = await call_turn(chain.slug, user, "again", conversation_id=first.conversation_id)
    assert (later.content, later.experiment["arm"]) == ("one", "control")
    fresh = await call_turn(chain.slug, user, "new conversation")
    assert (fresh.content, fresh.experiment["arm"]) == ("two", "treatment")


@pytestmark_db
@pytest.mark.usefixtures("fresh")
async def test_targeting_rules_come_before_the_split(users: list[Any]) -> None:
    chain = await _chain()
    qa, beta_user, other = users[:3]
    group = await Group.objects.acreate(name="beta")
    await beta_user.groups.aadd(group)
    rules = [
        {"arm": "treatment", "users": ["u0"]},
        {"arm": "treatment", "groups": ["beta"]},
        {"arm": "treatment", "param": "region", "in": ["eu"]},
    ]
    await _experiment(chain, weights=(10_000, 0), targeting=rules)
    assert (await call_turn(chain.slug, qa, "hi")).experiment["arm"] == "treatment"
    assert (await call_turn(chain.slug, beta_user, "hi")).experiment["arm"] == "treatment"
    assert (await call_turn(chain.slug, other, "hi")).experiment["arm"] == "control"


@pytestmark_db
@pytest.mark.usefixtures("fresh")
async def test_a_paused_experiment_serves_everyone_the_control(users: list[Any]) -> None:
    chain = await _chain(version_policy="pin")
    experiment = await _experiment(chain, weights=(0, 10_000))
    user = users[0]
    first = await call_turn(chain.slug, user, "hi")
    assert first.content == "two"
    experiment.status = Experiment.Status.PAUSED
    await experiment.asave()
    await _touch(experiment)
    later = await call_turn(chain.slug, user, "again", conversation_id=first.conversation_id)
    assert (later.content, later.version, later.experiment) == ("one", 1, None)


async def _chain(**fields: Any) -> Any:
    from asgiref.sync import sync_to_async

    return await sync_to_async(two_version_chain)(**fields)


async def _experiment(chain: Any, weights: tuple[int, int] = (5000, 5000), **fields: Any) -> Any:
    from asgiref.sync import sync_to_async

    arms = (("control", 1, weights[0]), ("treatment", 2, weights[1]))
    return await sync_to_async(make_experiment)(chain, arms, **fields)


async def _reweigh(experiment: Experiment, weights: tuple[int, int]) -> None:
    from asgiref.sync import sync_to_async

    def reweigh() -> None:
        for arm, weight in zip(experiment.arms.order_by("position"), weights, strict=True):
            arm.weight = weight
            arm.save()
        experiment.touch()

    await sync_to_async(reweigh)()


async def _touch(experiment: Experiment) -> None:
    from asgiref.sync import sync_to_async

    await sync_to_async(experiment.touch)()


@pytestmark_db
@pytest.mark.usefixtures("fresh")
async def test_a_tenant_unit_gives_a_tenant_one_arm(django_user_model: Any) -> None:
    from asgiref.sync import sync_to_async
    from django.test import override_settings

    from advisors_app.experiments.editing import ExperimentError, create_experiment

    chain = await _chain()
    body = {
        "name": "per tenant",
        "unit": "tenant",
        "arms": [
            {"name": "control", "version": 1, "weight": 5000},
            {"name": "treatment", "version": 2, "weight": 5000},
        ],
    }
    with pytest.raises(ExperimentError) as refused:
        await sync_to_async(create_experiment)(chain, body, user=None)
    assert list(refused.value.fields) == ["unit"]
    make = sync_to_async(django_user_model.objects.create_user)
    acme = [await make(f"acme-{n}", password="pw") for n in range(8)]
    with override_settings(ADVISORS={"TENANT_RESOLVER": "tests.experiment_helpers.tenant_of"}):
        experiment = await sync_to_async(create_experiment)(chain, body, user=None)
        await Experiment.objects.filter(pk=experiment.pk).aupdate(status="running")
        arms = {(await call_turn(chain.slug, user, "hi")).experiment["arm"] for user in acme}
    assert len(arms) == 1
