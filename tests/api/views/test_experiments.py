"""Experiments over REST (issue 37): create with field errors, permissions, start / pause /
stop, conclude through the promotion path, results per arm, and the experiment on the call
body and on ``done`` over SSE and the websocket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from advisors_app.experiments.serving import clear_plans
from advisors_app.models import (
    ChainLabelEvent,
    Dataset,
    Experiment,
    ExperimentEvent,
    PromotionGate,
    Score,
)
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.experiment_helpers import make_experiment, two_version_chain
from tests.factories import make_chain

pytestmark = pytest.mark.django_db(transaction=True)

RUNNER = ("run_experiment", "view_advisorchain", "change_chainlabel", "promote_production")


@pytest.fixture(autouse=True)
def fresh_plans() -> Iterator[None]:
    clear_plans()
    yield
    clear_plans()


def grant(user: Any, *codenames: str) -> Any:
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="advisors_app", codename__in=codenames)
    )
    return type(user).objects.get(pk=user.pk)


@pytest.fixture
def runner(django_user_model: Any) -> Any:
    user = django_user_model.objects.create_user("runner", password="pw", is_staff=True)
    return grant(user, *RUNNER)


@pytest.fixture
def ops(runner: Any) -> APIClient:
    return client_for(runner)


@pytest.fixture
def chain() -> Any:
    return two_version_chain("exp")


def body(**changes: Any) -> dict[str, Any]:
    return {
        "name": "v2 trial",
        "arms": [
            {"name": "control", "version": 1, "weight": 9000},
            {"name": "candidate", "version": 2, "weight": 1000},
        ],
        "guardrails": [{"metric": "error_rate", "max": 0.02}],
        **changes,
    }


def test_create_start_read_and_stop(chain: Any, ops: APIClient) -> None:
    created = ops.post("/api/chains/exp/experiments/", body(), format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert (data["status"], data["label"], data["unit"]) == ("draft", "production", "user")
    assert [(a["name"], a["version"], a["weight"], a["control"]) for a in data["arms"]] == [
        ("control", 1, 9000, True),
        ("candidate", 2, 1000, False),
    ]
    assert "salt" not in data
    pk = data["id"]
    assert ops.post(f"/api/experiments/{pk}/start/").json()["status"] == "running"
    assert ops.get("/api/chains/exp/experiments/").json()[0]["id"] == pk
    patched = ops.patch(
        f"/api/experiments/{pk}/",
        {
            "arms": [
                {"name": "control", "version": 1, "weight": 5000},
                {"name": "candidate", "version": 2, "weight": 5000},
            ]
        },
        format="json",
    )
    assert [a["weight"] for a in patched.json()["arms"]] == [5000, 5000]
    assert ops.post(f"/api/experiments/{pk}/pause/").json()["status"] == "paused"
    assert ops.post(f"/api/experiments/{pk}/stop/").json()["status"] == "stopped"
    again = ops.post(f"/api/experiments/{pk}/start/")
    assert (again.status_code, again.json()["error"]["code"]) == (409, "conflict")
    events = ExperimentEvent.objects.filter(experiment_id=pk).order_by("at", "id")
    assert [(e.from_status, e.to_status, e.actor.username) for e in events] == [
        ("draft", "running", "runner"),
        ("running", "paused", "runner"),
        ("paused", "stopped", "runner"),
    ]


def test_bad_input_gets_field_errors(chain: Any, ops: APIClient) -> None:
    other = make_chain("other")
    assert other.versions.count() == 1
    sums = ops.post(
        "/api/chains/exp/experiments/",
        body(
            arms=[
                {"name": "control", "version": 1, "weight": 9000},
                {"name": "candidate", "version": 2, "weight": 900},
            ]
        ),
        format="json",
    )
    assert sums.status_code == 400
    assert "sum to 10000" in sums.json()["error"]["fields"]["arms"][0]
    foreign = ops.post(
        "/api/chains/exp/experiments/",
        body(
            arms=[
                {"name": "control", "version": 1, "weight": 9000},
                {"name": "candidate", "version": 7, "weight": 1000},
            ]
        ),
        format="json",
    )
    assert foreign.json()["error"]["fields"] == {
        "arms.1.version": ["Chain 'exp' has no version 7."]
    }
    metric = ops.post(
        "/api/chains/exp/experiments/",
        body(guardrails=[{"metric": "vibes", "max": 1}]),
        format="json",
    )
    assert list(metric.json()["error"]["fields"]) == ["guardrails.0.metric"]
    assert Experiment.objects.count() == 0
    first = ops.post("/api/chains/exp/experiments/", body(), format="json").json()["id"]
    second = ops.post("/api/chains/exp/experiments/", body(name="another"), format="json").json()[
        "id"
    ]
    assert ops.post(f"/api/experiments/{first}/start/").status_code == 200
    clash = ops.post(f"/api/experiments/{second}/start/")
    assert clash.status_code == 400
    assert "already running" in clash.json()["error"]["fields"]["label"][0]


def test_a_version_of_another_chain_is_refused_by_the_shared_rules(chain: Any) -> None:
    from advisors_app.experiments.editing import arm_errors

    other = make_chain("other")
    errors, _ = arm_errors(
        chain,
        [
            {"name": "control", "version": chain.versions.get(number=1), "weight": 5000},
            {"name": "b", "version": other.versions.get(), "weight": 5000},
        ],
    )
    assert errors == {"arms.1.version": ["v1 is a version of another chain, not of 'exp'."]}


def test_only_run_experiment_holders_write(chain: Any, django_user_model: Any) -> None:
    viewer = grant(
        django_user_model.objects.create_user("viewer", password="pw", is_staff=True),
        "view_advisorchain",
        "change_chainlabel",
    )
    client = client_for(viewer)
    assert client.get("/api/chains/exp/experiments/").status_code == 200
    refused = client.post("/api/chains/exp/experiments/", body(), format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    experiment = make_experiment(chain)
    for action in ("start", "pause", "stop"):
        assert client.post(f"/api/experiments/{experiment.pk}/{action}/").status_code == 403
    assert (
        client.post(
            f"/api/experiments/{experiment.pk}/conclude/", {"winner": "treatment"}, format="json"
        ).status_code
        == 403
    )
    assert (
        client.patch(f"/api/experiments/{experiment.pk}/", {"name": "x"}, format="json").status_code
        == 403
    )
    bare = django_user_model.objects.create_user("bare", password="pw", is_staff=True)
    assert client_for(bare).get(f"/api/experiments/{experiment.pk}/").status_code == 403
    user = django_user_model.objects.create_user("plain", password="pw")
    assert client_for(user).get(f"/api/experiments/{experiment.pk}/").status_code == 404


def test_conclude_moves_the_label_through_the_promotion_path(chain: Any, ops: APIClient) -> None:
    experiment = make_experiment(chain)
    bad = ops.post(
        f"/api/experiments/{experiment.pk}/conclude/", {"winner": "nobody"}, format="json"
    )
    assert list(bad.json()["error"]["fields"]) == ["winner"]
    done = ops.post(
        f"/api/experiments/{experiment.pk}/conclude/", {"winner": "treatment"}, format="json"
    )
    assert done.status_code == 200, done.content
    assert (done.json()["status"], done.json()["winner"]) == ("concluded", "treatment")
    assert chain.labels.get(name="production").version.number == 2
    event = ChainLabelEvent.objects.get(label__name="production", to_version__number=2)
    assert "concluded" in event.reason and event.actor.username == "runner"
    assert (
        ops.post("/api/chains/exp/call/", {"message": "hi"}, format="json").json()["content"]
        == "two"
    )


def test_conclude_respects_a_promotion_gate(chain: Any, ops: APIClient) -> None:
    dataset = Dataset.objects.create(slug="gate", name="Gate")
    PromotionGate.objects.create(chain=chain, label="production", dataset=dataset)
    experiment = make_experiment(chain)
    refused = ops.post(
        f"/api/experiments/{experiment.pk}/conclude/", {"winner": "treatment"}, format="json"
    )
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "conflict")
    assert "gated by dataset 'gate'" in refused.json()["error"]["message"]
    assert chain.labels.get(name="production").version.number == 1
    experiment.refresh_from_db()
    assert experiment.status == "running"


def test_conclude_needs_the_permission_to_move_the_label(
    chain: Any, django_user_model: Any
) -> None:
    user = grant(
        django_user_model.objects.create_user("half", password="pw", is_staff=True),
        "run_experiment",
        "view_advisorchain",
        "change_chainlabel",
    )
    experiment = make_experiment(chain)
    refused = client_for(user).post(
        f"/api/experiments/{experiment.pk}/conclude/", {"winner": "treatment"}, format="json"
    )
    assert refused.status_code == 403
    assert chain.labels.get(name="production").version.number == 1


def test_starting_needs_the_permission_to_move_the_label(
    chain: Any, django_user_model: Any, runner: Any
) -> None:
    """Found by the security pass: a runner without the label's rights put an unpromoted
    version on 99.99 % of production by starting an experiment."""
    half = grant(
        django_user_model.objects.create_user("half", password="pw", is_staff=True),
        "run_experiment",
        "view_advisorchain",
        "change_chainlabel",
    )
    experiment = make_experiment(chain, status=Experiment.Status.DRAFT)
    refused = client_for(half).post(f"/api/experiments/{experiment.pk}/start/")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    assert "promote_production" in refused.json()["error"]["message"]
    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.DRAFT
    started = client_for(runner).post(f"/api/experiments/{experiment.pk}/start/")
    assert (started.status_code, started.json()["status"]) == (200, "running")


def test_the_call_body_and_sse_done_carry_the_experiment(chain: Any, alice: Any) -> None:
    experiment = make_experiment(chain, (("control", 1, 0), ("treatment", 2, 10_000)))
    api = client_for(alice)
    called = api.post("/api/chains/exp/call/", {"message": "hi"}, format="json").json()
    assert (called["content"], called["experiment"]) == (
        "two",
        {"id": experiment.pk, "arm": "treatment"},
    )
    response = api.post("/api/chains/exp/stream/", {"message": "hi"}, format="json")
    done = [data for kind, data in parse_sse(read_stream(response)) if kind == "done"]
    assert done[0]["experiment"] == {"id": experiment.pk, "arm": "treatment"}
    plain = make_chain("plain")
    assert (
        "experiment"
        not in api.post(f"/api/chains/{plain.slug}/call/", {"message": "hi"}, format="json").json()
    )


async def test_the_websocket_done_carries_the_experiment(chain: Any, alice: Any) -> None:
    from tests.test_consumers import frames_until_end, open_socket

    experiment = await sync_to_async(make_experiment)(
        chain, (("control", 1, 10_000), ("treatment", 2, 0))
    )
    socket = await open_socket(alice, slug="exp")
    try:
        await socket.send_json_to({"type": "message", "text": "hi"})
        frames = await frames_until_end(socket)
    finally:
        await socket.disconnect()
    assert frames[-1]["type"] == "done"
    assert frames[-1]["experiment"] == {"id": experiment.pk, "arm": "control"}


def test_results_per_arm_in_one_query(chain: Any, ops: APIClient, django_user_model: Any) -> None:
    experiment = make_experiment(chain)
    for n in range(12):
        client = client_for(django_user_model.objects.create_user(f"user{n}", password="pw"))
        answer = client.post("/api/chains/exp/call/", {"message": "hi"}, format="json").json()
        voted = client.put(
            f"/api/messages/{answer['message_id']}/feedback/", {"value": n % 3 != 0}, format="json"
        )
        assert voted.status_code in (200, 201), voted.content
    with CaptureQueriesContext(connection) as queries:
        figures = ops.get(f"/api/experiments/{experiment.pk}/results/").json()
    results_queries = [q for q in queries.captured_queries if "percentile_cont" in q["sql"]]
    assert len(results_queries) == 1
    arms = {arm["arm"]: arm for arm in figures["arms"]}
    assert set(arms) == {"control", "treatment"}
    assert arms["control"]["turns"] + arms["treatment"]["turns"] == 12
    for arm in arms.values():
        if not arm["turns"]:
            continue
        assert arm["error_rate"]["value"] == 0.0
        assert 0 <= arm["error_rate"]["low"] <= arm["error_rate"]["high"] <= 1
        assert (
            arm["latency_ms"]["p50"] is not None
            and arm["latency_ms"]["p95"] >= arm["latency_ms"]["p50"]
        )
        assert arm["thumbs_up_rate"]["n"] == arm["turns"]
    assert "vs_control" in arms["treatment"]["error_rate"]
    assert "vs_control" not in arms["control"]["error_rate"]
    assert Score.objects.filter(key="thumbs").count() == 12
