"""Issue 25's "done when", client half: an admin adds an MCP server in the admin, a chain enables
two of its tools, the admin publishes over the API, and a user's answer used both tools (called
concurrently over one pooled connection)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from advisors_app.core.testing import tool_call_response
from advisors_app.definition.runtime import load_chain
from advisors_app.models import AdvisorChain, AdvisorConfig, McpServer
from tests.factories import scripted_model
from tests.mcp.test_tools import tool_responses

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache", "mcp_settings"),
]


def test_admin_adds_a_server_enables_two_tools_publishes_and_a_user_gets_the_answer(
    admin_client: Client, admin_user: Any, django_user_model: Any, http_server: dict[str, Any]
) -> None:
    response = admin_client.post(
        "/admin/advisors_app/mcpserver/add/",
        {
            "slug": "toolbox",
            "url": http_server["url"],
            "headers": '{"Authorization": "Bearer ${MCP_TEST_TOKEN}"}',
            "connect_timeout": "10",
            "call_timeout": "30",
            "enabled": "on",
        },
    )
    assert response.status_code == 302 and McpServer.objects.filter(slug="toolbox").exists()

    chain = AdvisorChain.objects.create(
        slug="helper",
        name="Helper",
        chat_model=scripted_model("helper-model", responses=(), repeat=False),
    )
    AdvisorConfig.objects.create(
        chain=chain,
        advisor_type="tool_calling",
        params={"mcp_servers": [{"server": "toolbox", "tools": ["add", "shout"], "prefix": "tb_"}]},
    )
    admin_api = APIClient()
    admin_api.force_authenticate(admin_user)
    published = admin_api.post("/api/chains/helper/versions/", {"message": "MCP"}, format="json")
    assert published.status_code == 201, published.content

    model = load_chain("helper").client.chat_model
    model.add(  # type: ignore[attr-defined]
        tool_call_response(("tb_add", {"a": 40, "b": 2}), ("tb_shout", {"text": "done"})),
        "42, DONE.",
    )
    user_api = APIClient()
    user_api.force_authenticate(django_user_model.objects.create_user("ann"))
    answer = user_api.post("/api/chains/helper/call/", {"message": "go"}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["content"] == "42, DONE."
    assert tool_responses(model) == ["42", "DONE"]  # type: ignore[arg-type]
