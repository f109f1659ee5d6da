"""Admin of call logs (filters, trace view, durations), the conversations browser, the icon."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from advisors_app.admin.logs import duration_text
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import CallLog, Conversation
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def played(admin_client: Client) -> dict:
    """One playground turn, so a call log and a conversation exist."""
    clear_cache()
    chain = make_chain(
        model=scripted_model(responses=("Sure.",)), advisors=(("append", {"text": "!"}),)
    )
    url = f"/admin/advisors_app/advisorchain/{chain.pk}/playground/"
    return {
        "chain": chain,
        "result": admin_client.post(url, {"message": "hello"}).context["result"],
    }


def test_call_logs_list_filter_and_show_the_trace(admin_client: Client, played: dict) -> None:
    log = CallLog.objects.get()
    listing = admin_client.get("/admin/advisors_app/calllog/?status__exact=ok&mode__exact=call")
    assert listing.status_code == 200
    assert list(listing.context["cl"].queryset) == [log]
    empty = admin_client.get("/admin/advisors_app/calllog/?status__exact=error")
    assert list(empty.context["cl"].queryset) == []
    page = admin_client.get(f"/admin/advisors_app/calllog/{log.pk}/change/").content.decode()
    assert "AppendAdvisor" in page and "advisor-trace" in page
    assert f"/admin/advisors_app/advisorchain/{played['chain'].pk}/change/" in page
    assert admin_client.get("/admin/advisors_app/calllog/add/").status_code == 403


def test_conversations_show_their_transcript(admin_client: Client, played: dict) -> None:
    conversation = Conversation.objects.get()
    listing = admin_client.get("/admin/advisors_app/conversation/").content.decode()
    assert played["result"].conversation_id in listing
    page = admin_client.get(f"/admin/advisors_app/conversation/{conversation.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "hello" in text and "Sure." in text


def test_call_logs_say_which_version_and_label_ran(admin_client: Client, played: dict) -> None:
    url = f"/admin/advisors_app/advisorchain/{played['chain'].pk}/playground/"
    admin_client.post(url, {"message": "again", "run": "production"})
    listing = admin_client.get("/admin/advisors_app/calllog/")
    admin = listing.context["cl"].model_admin
    assert [admin.ran(log) for log in CallLog.objects.order_by("created")] == [
        "draft",
        "v1 (production)",
    ]
    assert "v1 (production)" in listing.content.decode()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, ""),
        (0.0042, "4.2 ms"),
        (0.8504, "850 ms"),
        (17.58356509400005, "17.58 s"),
        (125.4, "2 min 05 s"),
    ],
)
def test_durations_read_in_ms_s_or_min(seconds: float | None, text: str) -> None:
    assert duration_text(seconds) == text


def test_a_call_logs_latency_is_formatted_on_its_page_and_in_the_list(
    admin_client: Client, played: dict
) -> None:
    log = CallLog.objects.get()
    CallLog.objects.filter(pk=log.pk).update(latency=17.58356509400005, time_to_first_token=0.25)
    page = admin_client.get(f"/admin/advisors_app/calllog/{log.pk}/change/").content.decode()
    assert "17.58 s" in page and "250 ms" in page
    assert "17.5835" not in page
    listing = admin_client.get("/admin/advisors_app/calllog/").content.decode()
    assert "17.58 s" in listing and "17.5835" not in listing


def test_favicon_ico_leads_to_the_apps_icon(admin_client: Client) -> None:
    """Admin pages declare no icon, so browsers ask for /favicon.ico (it was a 404)."""
    response = admin_client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/advisors_app/favicon.svg"
    assert finders.find("advisors_app/favicon.svg")
