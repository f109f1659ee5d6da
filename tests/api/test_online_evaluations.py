"""``/api/chains/<slug>/online-evaluations/`` (issue 39): staff with the model permissions
list and add online evaluation rules; bad input is a 400 with field errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission

from advisors_app.models import OnlineEvaluation
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

URL = "/api/chains/support/online-evaluations/"
RULE = {"sample_rate": 0.5, "evaluators": [{"key": "contains", "params": {"strings": ["x"]}}]}


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    make_chain("support")
    user = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    return user


def grant(user: Any, *codenames: str) -> None:
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))


def test_staff_with_the_permissions_add_and_list_rules(staff: Any) -> None:
    scripted_model("judge")
    grant(staff, "add_onlineevaluation", "view_onlineevaluation", "view_advisorchain")
    api = client_for(staff)
    created = api.post(URL, {**RULE, "judge_model": "judge", "budget_usd": "2"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["label"], body["judge_model"], body["spent_usd"]) == (
        "production",
        "judge",
        "0.000000",
    )
    listed = api.get(URL).json()
    assert [rule["id"] for rule in listed] == [body["id"]]


def test_writes_and_reads_need_the_model_permissions(staff: Any, django_user_model: Any) -> None:
    grant(staff, "view_advisorchain")  # reading a chain's rules: seeing the chain, too
    api = client_for(staff)
    assert api.get(URL).status_code == 403
    assert api.post(URL, RULE, format="json").status_code == 403
    grant(staff, "view_onlineevaluation")
    assert api.get(URL).status_code == 200
    assert api.post(URL, RULE, format="json").status_code == 403
    assert not OnlineEvaluation.objects.exists()
    someone = django_user_model.objects.create_user("bob", password="pw")
    assert client_for(someone).get(URL).status_code == 404


@pytest.mark.parametrize(
    ("changes", "field", "text"),
    [
        ({"evaluators": [{"key": "nope"}]}, "evaluators", "Unknown evaluator"),
        (
            {"evaluators": [{"key": "latency_under", "params": {"threshold_ms": "x"}}]},
            "evaluators",
            "params.threshold_ms",
        ),
        ({"sample_rate": 1.5}, "sample_rate", "less than or equal to 1"),
        ({"filters": {"outcome": "maybe"}}, "filters", "outcome"),
        ({"judge_model": "nobody"}, "judge_model", "does not exist"),
    ],
)
def test_bad_input_is_a_400_with_field_errors(
    staff: Any, changes: dict[str, Any], field: str, text: str
) -> None:
    grant(staff, "add_onlineevaluation")
    response = client_for(staff).post(URL, {**RULE, **changes}, format="json")
    assert response.status_code == 400
    assert text in str(response.json()), response.json()
    assert field in str(response.json())
    assert not OnlineEvaluation.objects.exists()
