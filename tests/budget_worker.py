"""A separate process for the cross-process budget tests: runs turns with its own budget cache.

Started by ``tests/test_budget_processes.py`` with ``DJANGO_SETTINGS_MODULE=tests.settings`` and
the test database's ``DATABASE_URL``. The budget list it caches never expires
(``CACHE_SECONDS`` is infinite), so what it sees of a change made elsewhere comes from the
database, never from a lifetime running out. Reads one JSON command per line on stdin and answers
one JSON line:

- ``{"op": "turn", "chain": slug, "user": pk, "message": text}`` → ``{"status": "ok"}``, or
  ``{"refused": code}`` for a refusal, or ``{"failed": "<exception type>: <message>"}``;
- ``{"op": "budgets", "user": pk, "stamp": s}`` → ``{"names": [...]}``: the budgets this process
  applies to the user's turns, asked with the budgets' stamp ``s`` (``null``: without one).
"""

from __future__ import annotations

import json
import math
import sys

import django


def main() -> None:
    django.setup()
    from asgiref.sync import async_to_sync
    from django.contrib.auth import get_user_model

    from advisors_app.core.exceptions import BudgetExceededError
    from advisors_app.costs import budgets
    from advisors_app.exceptions import Refusal
    from advisors_app.turn import call_turn

    budgets.CACHE_SECONDS = math.inf
    for line in sys.stdin:
        command = json.loads(line)
        user = get_user_model().objects.get(pk=command["user"])
        answer: dict[str, object]
        if command["op"] == "turn":
            try:
                outcome = async_to_sync(call_turn)(command["chain"], user, command["message"])
                answer = {"status": outcome.status}
            except Refusal as refused:
                answer = {"refused": refused.code}
            except BudgetExceededError:
                answer = {"refused": "budget_exceeded"}
            except Exception as exc:
                answer = {"failed": f"{type(exc).__name__}: {exc}"}
        else:
            found = budgets.applicable_budgets(user, None, lambda: None, stamp=command["stamp"])
            answer = {"names": sorted(b.name for b in found)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
