"""The evaluation gate (issue 22, "Gate"): ``manage.py eval_gate`` exits 0 when the candidate
is no worse, 1 when it is worse, 2 when it cannot run; runs of unchanged versions and datasets
are reused."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.datasets import import_items, parse_items
from advisors_app.models import AdvisorChain, Dataset, EvalRun
from tests.eval_fixtures import ITEMS, make_dataset, make_versions

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_chains() -> Any:
    clear_cache()
    yield
    clear_cache()


def gate(*args: str) -> tuple[int, str]:
    """``(exit status, output)`` of ``eval_gate refunds --chain support ...``."""
    out = StringIO()
    try:
        call_command("eval_gate", "refunds", "--chain", "support", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


STAGING = ("--candidate", "staging", "--baseline", "production")


def test_a_worse_candidate_fails_the_gate() -> None:
    make_versions()
    make_dataset()
    status, text = gate(*STAGING)
    assert status == 1
    assert "1 regressed, 1 improved, 1 unchanged" in text
    assert "The candidate is worse: 1 item(s) regressed (days); at most 0 may" in text
    assert EvalRun.objects.filter(status="done").count() == 2
    staging = EvalRun.objects.get(version_number=2)
    assert (staging.label, staging.version_asked) == ("staging", "2")


def test_thresholds_and_reused_runs() -> None:
    make_versions()
    make_dataset()
    assert gate(*STAGING)[0] == 1
    status, text = gate(*STAGING, "--max-regressions", "1")
    assert status == 0 and "Gate passed." in text
    assert "reused the baseline and candidate run" in text
    assert EvalRun.objects.count() == 2  # nothing ran again
    status, text = gate(*STAGING, "--max-regressions", "1", "--min-delta", "0.01")
    assert status == 1 and "contains: mean delta +0.0000 is below +0.0100" in text
    # The same version on both sides passes.
    assert gate("--candidate", "production", "--baseline", "production")[0] == 0


def test_a_changed_dataset_is_run_again() -> None:
    make_versions()
    dataset = make_dataset()
    gate(*STAGING)
    edited = json.loads(json.dumps(ITEMS))
    edited[0]["expected"]["output"] = "days"  # both versions say "days" now
    import_items(dataset, parse_items(edited))
    status, text = gate(*STAGING, "--json")
    body = json.loads(text)
    assert status == 0 and body["passed"] and body["reused"] == []
    assert EvalRun.objects.count() == 4
    assert gate(*STAGING, "--no-reuse")[0] == 0
    assert EvalRun.objects.count() == 6


def test_a_gate_that_cannot_run_exits_2() -> None:
    make_versions()
    make_dataset()
    assert gate("--candidate", "qa", "--baseline", "production")[0] == 2
    assert not EvalRun.objects.exists()  # the unknown label failed before the baseline ran
    assert gate(*STAGING, "--evaluator", "nope")[0] == 2
    assert gate(*STAGING, "--evaluator", "contains:[")[0] == 2
    assert gate(*STAGING, "--max-regressions", "-1")[0] == 2
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("eval_gate", "missing", "--chain", "support", *STAGING, stdout=out)
    assert caught.value.returncode == 2
    Dataset.objects.create(slug="empty", name="Empty")
    with pytest.raises(CommandError, match="has no items") as caught:
        call_command("eval_gate", "empty", "--chain", "support", *STAGING, stdout=out)
    assert caught.value.returncode == 2


# -- the promotion gate -----------------------------------------------------------------------


def test_promote_is_blocked_by_a_failing_gate(admin_user: Any, admin_client: Any) -> None:
    from advisors_app.models import PromotionGate
    from tests.api.conftest import client_for

    chain = make_versions()
    dataset = make_dataset()
    gate_row = PromotionGate.objects.create(chain=chain, dataset=dataset)
    api = client_for(admin_user)
    url = "/api/chains/support/labels/production/"
    move = {"version": 2, "reason": "ship it"}

    # No run yet: refused, saying what to run.
    response = api.put(url, move, format="json")
    assert response.status_code == 409, response.content
    assert "has no finished run on it" in response.json()["error"]["message"]
    # The runs show a regression: refused, on the API and the admin's Promote page.
    assert gate(*STAGING)[0] == 1
    response = api.put(url, move, format="json")
    assert response.status_code == 409
    assert "1 item(s) regressed (days)" in response.json()["error"]["message"]
    promote = f"/admin/advisors_app/advisorchain/{chain.pk}/promote/"
    page = admin_client.post(promote, {"label": "production", "version": 2, "reason": "x"})
    assert page.status_code == 200 and "1 item(s) regressed (days)" in page.content.decode()
    preview = admin_client.get(promote + "?label=production&version=2").content.decode()
    assert "Blocked: production is gated by dataset" in preview
    chain.refresh_from_db()
    assert chain.labels.get(name="production").version.number == 1
    # Other labels are not gated; a gate that allows one regression lets production move.
    assert api.put("/api/chains/support/labels/qa/", move, format="json").status_code == 200
    gate_row.max_regressions = 1
    gate_row.save()
    response = api.put(url, move, format="json")
    assert response.status_code == 200, response.content
    assert chain.labels.get(name="production").version.number == 2


def test_a_gate_turned_off_or_a_dataset_changed(admin_user: Any) -> None:
    from advisors_app.models import PromotionGate
    from tests.api.conftest import client_for

    chain = make_versions()
    dataset = make_dataset()
    PromotionGate.objects.create(chain=chain, dataset=dataset, max_regressions=1)
    gate(*STAGING)
    edited = json.loads(json.dumps(ITEMS))
    edited[1]["expected"]["output"] = "bank"
    import_items(dataset, parse_items(edited))  # the runs are out of date now
    api = client_for(admin_user)
    move = {"version": 2, "reason": "ship it"}
    url = "/api/chains/support/labels/production/"
    assert api.put(url, move, format="json").status_code == 409
    PromotionGate.objects.update(enabled=False)
    assert api.put(url, move, format="json").status_code == 200


def test_a_gate_on_a_label_no_chain_can_have_is_refused() -> None:
    from django.core.exceptions import ValidationError

    from advisors_app.models import PromotionGate

    make_versions()
    dataset = make_dataset()
    gate_row = PromotionGate(
        chain=AdvisorChain.objects.get(slug="support"), label="Prod uction!", dataset=dataset
    )
    with pytest.raises(ValidationError) as caught:
        gate_row.full_clean()
    assert "label" in caught.value.message_dict
