"""The evaluation gate (issue 22, "Gate"; issue 40, "A gate that does not flip"):
``manage.py eval_gate`` exits 0 when every score key's 95 % interval of the mean difference
clears ``-margin``, 1 when one does not (or a point check asked for fails), 2 when it cannot
run; runs of unchanged versions and datasets, with the same repeats and pinned options, are
reused. On scripted models; tests/test_eval_gate_embedded.py runs the real one."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.compare import Comparison, ScoreComparison
from advisors_app.evaluation.datasets import import_items, parse_items
from advisors_app.evaluation.gate import judge
from advisors_app.models import AdvisorChain, ChainVersion, Dataset, EvalRun
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


@pytest.fixture
def chain_answering() -> Any:
    """``chain_answering(text)``: publish a version of ``support`` answering ``text`` and move
    ``staging`` to it."""
    from advisors_app.definition import move_label, publish
    from tests.factories import scripted_model

    def answer(text: str) -> ChainVersion:
        chain = AdvisorChain.objects.get(slug="support")
        chain.chat_model = scripted_model(f"model-{ChainVersion.objects.count()}", (text,))
        chain.save()
        version, _ = publish(chain, message=text)
        move_label(chain, "staging", version)
        clear_cache()
        return version

    return answer


def test_a_regression_another_item_makes_up_for_fails_the_gate() -> None:
    """v2 loses ``days`` and wins ``bank``: the mean difference is 0, but three items cannot
    rule out a loss of more than the margin — the interval decides, not the mean."""
    make_versions()
    make_dataset()
    status, text = gate(*STAGING)
    assert status == 1
    assert "1 regressed, 1 improved, 1 unchanged" in text
    line = "contains: mean difference +0.0000, 95% interval [-1.0000, +1.0000] (3 items)"
    assert f"  {line}, below -0.0500" in text
    assert f"Gate failed: {line}, below -0.0500: it may be worse by more than the margin" in text
    assert EvalRun.objects.filter(status="done").count() == 2
    staging = EvalRun.objects.get(version_number=2)
    assert (staging.label, staging.version_asked) == ("staging", "2")
    assert (staging.repeats, staging.chat_options) == (1, {"temperature": 0, "seed": 0})


def test_a_worse_candidate_fails_and_a_better_one_passes(chain_answering: Any) -> None:
    make_versions()
    make_dataset()
    chain_answering("I cannot say.")  # worse on every item v1 passes
    status, text = gate(*STAGING)
    assert status == 1 and "(3 items), below -0.0500" in text
    chain_answering("Refunds take 5 days, by bank transfer.")  # as good, and better on one
    status, text = gate(*STAGING)
    assert status == 0, text
    assert "contains: mean difference +0.3333, 95% interval [+0.0000, +1.0000] (3 items)" in text
    assert text.endswith("Gate passed.\n")


def test_margin_point_checks_and_reused_runs() -> None:
    make_versions()
    make_dataset()
    assert gate(*STAGING)[0] == 1
    # A margin of the whole scale accepts the interval [-1, 1].
    status, text = gate(*STAGING, "--margin", "1")
    assert status == 0 and "Gate passed." in text and "not below -1.0000" in text
    assert "reused the baseline and candidate run" in text
    assert EvalRun.objects.count() == 2  # nothing ran again
    # The point checks, when asked for, come on top of the interval.
    status, text = gate(*STAGING, "--margin", "1", "--max-regressions", "0")
    assert status == 1 and "1 item(s) regressed (days); at most 0 may" in text
    status, text = gate(*STAGING, "--margin", "1", "--min-delta", "0.01")
    assert status == 1 and "contains: mean delta +0.0000 is below +0.0100" in text
    # The same version on both sides passes: its difference is 0 on every item.
    status, text = gate("--candidate", "production", "--baseline", "production")
    assert status == 0 and "95% interval [+0.0000, +0.0000]" in text


def test_repeats_and_pinned_options_are_part_of_what_is_reused() -> None:
    make_versions()
    make_dataset()
    gate(*STAGING, "--margin", "1")
    status, text = gate(*STAGING, "--margin", "1", "--repeats", "3", "--json")
    body = json.loads(text)
    assert status == 0 and body["reused"] == []  # runs of one repeat are not runs of three
    assert body["margin"] == 1.0
    assert body["intervals"]["contains"] == {
        "delta": 0.0,
        "ci_low": -1.0,
        "ci_high": 1.0,
        "paired": 3,
        "passed": True,
    }
    assert body["candidate"]["repeats"] == 3
    assert body["candidate"]["chat_options"] == {"temperature": 0, "seed": 0}
    run = EvalRun.objects.get(pk=body["candidate"]["run"])
    assert (run.total, run.done, run.results.count()) == (9, 9, 9)
    assert run.summary["items"] == 3 and run.summary["results"] == 9
    unpinned = json.loads(gate(*STAGING, "--margin", "1", "--chat-options", "{}", "--json")[1])
    assert unpinned["reused"] == [] and unpinned["candidate"]["chat_options"] == {}
    assert gate(*STAGING, "--margin", "1", "--chat-options", "{}")[1].count("reused the") == 1


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
    for bad, message in (
        (("--margin", "1.5"), "margin 1.5: give a number from 0 to 1"),
        (("--repeats", "0"), "repeats: give a whole number from 1 to 20"),
        (("--chat-options", "["), "--chat-options '[': not JSON"),
        (("--chat-options", '{"colour": 1}'), "chat options"),
        (("--chat-options", '{"model": "gpt-x"}'), "chat options"),  # not a request option
    ):
        status, text = gate(*STAGING, *bad)
        assert status == 2 and message in text, text
    assert not EvalRun.objects.exists()
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("eval_gate", "missing", "--chain", "support", *STAGING, stdout=out)
    assert caught.value.returncode == 2
    Dataset.objects.create(slug="empty", name="Empty")
    with pytest.raises(CommandError, match="has no items") as caught:
        call_command("eval_gate", "empty", "--chain", "support", *STAGING, stdout=out)
    assert caught.value.returncode == 2


def _comparison(**intervals: tuple[float, float] | None) -> Comparison:
    scores = {
        key: ScoreComparison(
            key=key,
            baseline_mean=0.5,
            candidate_mean=0.5,
            delta=None if bounds is None else sum(bounds) / 2,
            ci_low=None if bounds is None else bounds[0],
            ci_high=None if bounds is None else bounds[1],
            paired=0 if bounds is None else 4,
            regressed=0,
            improved=0,
            unchanged=4,
        )
        for key, bounds in intervals.items()
    }
    return Comparison(1, 2, [], scores, [], [], seed=0, resamples=2000)


def test_the_verdict_rests_on_each_lower_bound() -> None:
    assert judge(_comparison(a=(-0.05, 0.1), b=(0.0, 0.0))) == []  # on the margin: not below
    reasons = judge(_comparison(a=(-0.0501, 0.1), b=(-0.2, 0.3)))
    assert [reason.split(":")[0] for reason in reasons] == ["a", "b"]
    assert judge(_comparison(a=(-0.2, 0.3)), margin=0.2) == []
    assert judge(_comparison(a=(0.0, 0.0)), margin=0.0) == []
    # A key no item has a number for in both runs is not judged; with none, nothing is decided.
    assert judge(_comparison(a=(0.0, 0.1), label_only=None)) == []
    assert judge(_comparison(label_only=None)) == [
        "no score key has a number for the same item in both runs: nothing to decide on"
    ]


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
    # The runs cannot rule out a regression: refused, on the API and the admin's Promote page.
    assert gate(*STAGING)[0] == 1
    response = api.put(url, move, format="json")
    assert response.status_code == 409
    interval = "95% interval [-1.0000, +1.0000] (3 items), below -0.0500"
    assert interval in response.json()["error"]["message"]
    promote = f"/admin/advisors_app/advisorchain/{chain.pk}/promote/"
    page = admin_client.post(promote, {"label": "production", "version": 2, "reason": "x"})
    assert page.status_code == 200 and interval in page.content.decode()
    preview = admin_client.get(promote + "?label=production&version=2").content.decode()
    assert "Blocked: production is gated by dataset" in preview
    chain.refresh_from_db()
    assert chain.labels.get(name="production").version.number == 1
    # Other labels are not gated; a point check, when set, counts too.
    assert api.put("/api/chains/support/labels/qa/", move, format="json").status_code == 200
    gate_row.margin = 1.0
    gate_row.max_regressions = 0
    gate_row.save()
    response = api.put(url, move, format="json")
    assert response.status_code == 409
    assert "1 item(s) regressed (days)" in response.json()["error"]["message"]
    # A gate whose margin takes the whole scale lets production move.
    gate_row.max_regressions = None
    gate_row.save()
    response = api.put(url, move, format="json")
    assert response.status_code == 200, response.content
    assert chain.labels.get(name="production").version.number == 2


def test_a_gate_turned_off_or_a_dataset_changed(admin_user: Any) -> None:
    from advisors_app.models import PromotionGate
    from tests.api.conftest import client_for

    chain = make_versions()
    dataset = make_dataset()
    PromotionGate.objects.create(chain=chain, dataset=dataset, margin=1.0)
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
