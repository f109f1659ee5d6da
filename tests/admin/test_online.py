"""Admin of online evaluation rules (issue 39): standard model permissions, field errors for
unknown evaluators, bad params, filters and sample rates, and why judging stopped."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.db import IntegrityError, transaction
from django.test import Client

from advisors_app.models import OnlineEvaluation
from tests.factories import make_chain

pytestmark = pytest.mark.django_db

ADD = "/admin/advisors_app/onlineevaluation/add/"


def form(chain: Any, **changes: Any) -> dict[str, Any]:
    data = {
        "chain": chain.pk,
        "label": "production",
        "arm": "",
        "sample_rate": "0.25",
        "filters": "{}",
        "evaluators": json.dumps([{"key": "contains", "params": {"strings": ["refund"]}}]),
        "judge_model": "",
        "budget_usd": "",
        "enabled": "on",
    }
    return {**data, **changes}


def test_a_rule_is_added_with_registry_evaluators(admin_client: Client) -> None:
    chain = make_chain("support")
    response = admin_client.post(ADD, form(chain))
    assert response.status_code == 302, response.content.decode()[:3000]
    rule = OnlineEvaluation.objects.get()
    assert (rule.sample_rate, rule.evaluators[0]["key"]) == (0.25, "contains")


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"evaluators": json.dumps([{"key": "nope"}])}, "Unknown evaluator"),
        (
            {"evaluators": json.dumps([{"key": "latency_under", "params": {"threshold_ms": -1}}])},
            "params.threshold_ms",
        ),
        ({"evaluators": "[]"}, "This field is required"),
        ({"evaluators": json.dumps({"key": "contains"})}, "Enter a JSON list"),
        ({"filters": json.dumps({"outcome": ["maybe"]})}, "outcome: one or more of"),
        ({"filters": json.dumps({"colour": "red"})}, "Unknown filter"),
        ({"sample_rate": "1.5"}, "less than or equal to 1"),
    ],
)
def test_bad_input_is_a_field_error(admin_client: Client, changes: Any, error: str) -> None:
    chain = make_chain("support")
    response = admin_client.post(ADD, form(chain, **changes))
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not OnlineEvaluation.objects.exists()


def test_the_database_refuses_a_rate_outside_0_to_1() -> None:
    chain = make_chain("support")
    with pytest.raises(IntegrityError), transaction.atomic():
        OnlineEvaluation.objects.create(chain=chain, sample_rate=2, evaluators=[])


def test_the_list_says_why_judging_stopped(admin_client: Client) -> None:
    chain = make_chain("support")
    OnlineEvaluation.objects.create(
        chain=chain,
        evaluators=[],
        budget_usd=Decimal("0.5"),
        spent_usd=Decimal("0.5"),
        stopped_reason="budget used up",
    )
    page = admin_client.get("/admin/advisors_app/onlineevaluation/").content.decode()
    assert "budget used up" in page


def test_staff_need_the_model_permissions(django_user_model: Any) -> None:
    chain = make_chain("support")
    staff = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get("/admin/advisors_app/onlineevaluation/").status_code == 403
    assert client.post(ADD, form(chain)).status_code == 403
    staff.user_permissions.add(
        Permission.objects.get(codename="add_onlineevaluation"),
        Permission.objects.get(codename="view_onlineevaluation"),
    )
    assert client.post(ADD, form(chain)).status_code == 302
    assert OnlineEvaluation.objects.count() == 1
