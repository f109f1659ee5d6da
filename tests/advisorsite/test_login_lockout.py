"""Login throttling of the example site (django-axes): a username is locked out per IP address."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db

LIMIT = settings.AXES_FAILURE_LIMIT


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="right password")


def log_in(password: str, ip: str = "203.0.113.7", path: str = "/accounts/login/") -> Any:
    """A login through the form, from ``ip``; a fresh client (no session) each time."""
    return Client(REMOTE_ADDR=ip).post(
        path, {"username": "alice", "password": password, "next": "/chat/"}
    )


def test_the_site_locks_a_username_out_after_repeated_failures_from_one_address(
    alice: Any,
) -> None:
    assert LIMIT == 5
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60
    for _ in range(LIMIT - 1):
        refused = log_in("guess")
        assert refused.status_code == 200  # the form again, with its error
        assert "did not match" in refused.content.decode()
    locked = log_in("guess")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed logins" in page and "paused for 15 minutes" in page
    # Locked out: even the right password is refused, and nothing is logged in.
    still = log_in("right password")
    assert still.status_code == 429 and "sessionid" not in still.cookies


def test_the_lock_holds_for_that_address_only_and_ends_after_the_cool_off(alice: Any) -> None:
    for _ in range(LIMIT):
        log_in("guess")
    assert log_in("right password").status_code == 429
    # Someone else's failures never lock the user out from their own address.
    elsewhere = log_in("right password", ip="198.51.100.20")
    assert elsewhere.status_code == 302 and elsewhere.url == "/chat/"
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert log_in("right password").status_code == 302


def test_a_successful_login_resets_the_count(alice: Any) -> None:
    for _ in range(LIMIT - 1):
        log_in("guess")
    assert log_in("right password").status_code == 302
    for _ in range(LIMIT - 1):
        assert log_in("guess").status_code == 200
    assert log_in("right password").status_code == 302


def test_the_admin_login_is_throttled_too(django_user_model: Any) -> None:
    django_user_model.objects.create_superuser("alice", password="right password")
    for _ in range(LIMIT):
        log_in("guess", path="/admin/login/")
    assert log_in("right password", path="/admin/login/").status_code == 429
    # The chat site's own login form shares the count: it is the same username and address.
    assert log_in("right password").status_code == 429


def test_sessions_made_without_a_password_still_work(alice: Any) -> None:
    """``force_login`` (the tests' way in) picks the model backend, not axes' standalone one."""
    client = Client()
    client.force_login(alice)
    assert client.get("/chat/").status_code == 200
