"""``GET /api/usage/``: own usage for users, everyone's for staff with view_calllog, grouping,
date filters and field errors."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from tests.api.conftest import client_for
from tests.cost_logs import log_call, priced_round

pytestmark = pytest.mark.django_db

D1 = datetime(2024, 11, 2, 10, 0, tzinfo=UTC)
D2 = D1 + timedelta(days=1)
RANGE = {"from": "2024-11-01", "to": "2024-11-30"}


@pytest.fixture
def logs(alice: Any, bob: Any) -> None:
    log_call(alice, "support", D1, priced_round("gpt", 100, 50, "0.0001", "0.0002"))
    log_call(alice, "support", D2, priced_round("gpt", 10, 0, None, None))
    log_call(
        bob,
        "triage",
        D1,
        priced_round("gpt", 1000, 500, "0.001", "0.002"),
        priced_round("mini", 20, 10, "0.00002", "0.00001"),
    )


@pytest.fixture
def auditor(django_user_model: Any) -> Any:
    """Staff who may view call logs."""
    user = django_user_model.objects.create_user("auditor", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_calllog"))
    return user


def usage(client: Any, **params: Any) -> Any:
    return client.get("/api/usage/", params)


def test_users_see_their_own_usage_by_day(logs: None, api: Any) -> None:
    response = usage(api, **RANGE)
    assert response.status_code == 200
    assert response.json() == [
        {
            "key": "2024-11-02",
            "calls": 1,
            "prompt_tokens": 100,
            "completion_tokens": 50,
            "cost": {"USD": "0.0003"},
            "unknown_cost_calls": 0,
        },
        {
            "key": "2024-11-03",
            "calls": 1,
            "prompt_tokens": 10,
            "completion_tokens": 0,
            "cost": {},
            "unknown_cost_calls": 1,
        },
    ]


def test_staff_with_the_permission_see_everyone_and_may_pick_a_user(
    logs: None, auditor: Any, alice: Any, bob: Any
) -> None:
    client = client_for(auditor)
    [first, second] = usage(client, **RANGE).json()
    assert (first["key"], first["calls"], first["cost"]) == ("2024-11-02", 2, {"USD": "0.00333"})
    assert second["unknown_cost_calls"] == 1
    [only_bob] = usage(client, user=bob.pk, **RANGE).json()
    assert only_bob["cost"] == {"USD": "0.00303"}
    assert usage(client, user=999_999, **RANGE).json() == []


def test_staff_without_the_permission_see_their_own_only(
    logs: None, bare_staff: Any, alice: Any
) -> None:
    client = client_for(bare_staff)
    log_call(bare_staff, "support", D1, priced_round("gpt", 1, 1, "1", "1"))
    assert usage(client, **RANGE).json()[0]["cost"] == {"USD": "2"}
    refused = usage(client, user=alice.pk, **RANGE)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert "advisors_app.view_calllog" in refused.json()["error"]["message"]
    assert usage(client, user=bare_staff.pk, **RANGE).status_code == 200


def test_a_user_naming_someone_else_is_refused(logs: None, api: Any, bob: Any, alice: Any) -> None:
    assert usage(api, user=bob.pk).status_code == 403
    assert usage(api, user=alice.pk, **RANGE).json()[0]["calls"] == 1


def test_group_by_chain_and_model(logs: None, auditor: Any) -> None:
    client = client_for(auditor)
    by_chain = usage(client, group_by="chain", **RANGE).json()
    assert [(r["key"], r["calls"], r["unknown_cost_calls"]) for r in by_chain] == [
        ("support", 2, 1),
        ("triage", 1, 0),
    ]
    by_model = usage(client, group_by="model", **RANGE).json()
    assert [(r["key"], r["calls"], r["prompt_tokens"], r["cost"]) for r in by_model] == [
        ("gpt", 3, 1110, {"USD": "0.0033"}),
        ("mini", 1, 20, {"USD": "0.00003"}),
    ]


def test_dates_filter_inclusively_and_default_to_the_last_30_days(
    logs: None, api: Any, alice: Any
) -> None:
    one_day = usage(api, **{"from": "2024-11-03", "to": "2024-11-03"}).json()
    assert [r["key"] for r in one_day] == ["2024-11-03"]
    assert usage(api, **{"from": "2024-11-04"}, to="2024-12-01").json() == []
    assert usage(api).json() == []  # November 2024 is not in the last 30 days
    now = timezone.now()
    log_call(alice, "support", now - timedelta(days=29), priced_round("gpt", 1, 1, "1", "1"))
    log_call(alice, "support", now - timedelta(days=31), priced_round("gpt", 1, 1, "1", "1"))
    recent = usage(api).json()
    assert [r["key"] for r in recent] == [(timezone.localdate() - timedelta(days=29)).isoformat()]
    assert usage(api, to=date(2024, 11, 2).isoformat()).json()[0]["calls"] == 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group_by": "user"}, "group_by"),
        ({"group_by": "week"}, "group_by"),
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-02-30"}, "to"),
        ({"from": "2024-11-05", "to": "2024-11-04"}, "from"),
        ({"user": "me"}, "user"),
        ({"user": "0"}, "user"),
    ],
)
def test_bad_parameters_are_field_errors(api: Any, params: dict[str, str], field: str) -> None:
    response = usage(api, **params)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert list(error["fields"]) == [field]


def test_the_ends_of_the_calendar(logs: None, api: Any) -> None:
    response = usage(api, **{"from": "2024-11-01", "to": "9999-12-31"})
    assert [r["key"] for r in response.json()] == ["2024-11-02", "2024-11-03"]
    assert len(usage(api, **{"from": "0001-01-01"}, to="2024-11-30").json()) == 2
    with timezone.override("Europe/Paris"):
        # Midnight of January 1st of the year 1 in Paris is before the year 1 in UTC.
        response = usage(api, **{"from": "0001-01-01"})
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"from": ["0001-01-01 is out of range."]}


def test_anonymous_callers_are_refused(logs: None) -> None:
    response = usage(client_for(None))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
