"""Fixtures of the REST API tests: users with tokens, clients, fresh caches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from advisors_app.definition.runtime import clear_cache
from tests.helpers import database_url_for_subprocess
from tests.live_server import LiveServer


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    """Built chains and throttle histories never leak between tests."""
    clear_cache()
    cache.clear()
    yield
    clear_cache()
    cache.clear()


def client_for(user: Any | None) -> APIClient:
    """An ``APIClient`` sending ``user``'s token (``None``: anonymous)."""
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


#: The models a chain page edits: the chain and its advisors (an inline).
CHAIN_MODELS = ("advisorchain", "advisorconfig")


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    """Staff who may add, change and delete chains with their advisors, versions and labels
    (what the admin's chain pages ask for), and nothing else: not publish nor move labels."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="advisors_app",
            codename__in=[
                *(f"{a}_{m}" for a in ("add", "change", "delete") for m in CHAIN_MODELS),
                "delete_chainversion",
                "delete_chainlabel",
                "delete_chainlabelevent",
            ],
        )
    )
    return user


@pytest.fixture
def bare_staff(django_user_model: Any) -> Any:
    """Staff without any model permission."""
    return django_user_model.objects.create_user("bare", password="pw", is_staff=True)


@pytest.fixture
def api(alice: Any) -> APIClient:
    """Alice's client."""
    return client_for(alice)


@pytest.fixture(scope="session")
def live_api(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of the example site under Daphne (a subprocess) on the test database.

    Rows a test writes must be committed to be seen: use ``django_db(transaction=True)``.
    """
    log = tmp_path_factory.mktemp("daphne") / "server.log"
    with LiveServer(log, DATABASE_URL=database_url_for_subprocess()) as server:
        yield server.url


@pytest.fixture
def superuser(django_user_model: Any) -> Any:
    """Staff with every permission (publishing, moving labels, promoting to production)."""
    return django_user_model.objects.create_superuser("root", password="pw")
