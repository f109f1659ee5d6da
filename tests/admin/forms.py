"""POST data for the chain admin page: the chain's fields plus the advisor-row formset."""

from __future__ import annotations

import json
from typing import Any

from advisors_app.models import AdvisorChain


def chain_form(
    chain: AdvisorChain | None = None, rows: list[dict[str, Any]] = (), **fields: Any
) -> dict[str, Any]:
    """Form data as the browser sends it; ``rows`` are advisor rows (``id`` for saved ones)."""
    data: dict[str, Any] = {
        "slug": chain.slug if chain else "support",
        "name": chain.name if chain else "Support",
        "description": "",
        "enabled": "on",
        "chat_model": chain.chat_model_id if chain and chain.chat_model_id else "",
        "system_prompt": chain.system_prompt if chain else "",
        "system_template": "",
        "default_options": "{}",
        "tools": [],
        "version_policy": chain.version_policy if chain else "pin",
    }
    data.update(fields)
    if data.get("enabled") is False:
        del data["enabled"]
    rows = list(rows)
    data.update(
        {
            "advisors-TOTAL_FORMS": str(len(rows)),
            "advisors-INITIAL_FORMS": str(sum(1 for r in rows if r.get("id"))),
            "advisors-MIN_NUM_FORMS": "0",
            "advisors-MAX_NUM_FORMS": "1000",
        }
    )
    for i, row in enumerate(rows):
        prefix = f"advisors-{i}-"
        data[prefix + "id"] = row.get("id", "")
        data[prefix + "chain"] = chain.pk if chain else ""
        data[prefix + "advisor_type"] = row["advisor_type"]
        data[prefix + "order"] = row.get("order", "")
        params = row.get("params", {})
        data[prefix + "params"] = params if isinstance(params, str) else json.dumps(params)
        if row.get("enabled", True):
            data[prefix + "enabled"] = "on"
        if row.get("delete"):
            data[prefix + "DELETE"] = "on"
    return data
