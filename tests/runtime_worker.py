"""A separate process for the cross-process runtime tests: runs chains or moves their labels.

Started by ``tests/test_runtime.py`` with ``DJANGO_SETTINGS_MODULE=tests.settings`` and the test
database's ``DATABASE_URL``. Reads one JSON command per line on stdin and answers one JSON line:

- ``{"op": "run", "slug": s}`` → ``{"reply", "user_text", "snapshot_hash", "compiled"}`` where
  ``user_text`` is the user message the model received and ``compiled`` identifies the built
  chain object (it changes only when this process built another one);
- ``{"op": "move", "slug": s, "label": name, "version": n}`` → ``{"ok": true}``.
"""

from __future__ import annotations

import json
import sys

import django


def main() -> None:
    django.setup()
    from asgiref.sync import async_to_sync

    from advisors_app.definition import move_label
    from advisors_app.definition.runtime import load_chain
    from advisors_app.models import AdvisorChain

    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "run":
            compiled = load_chain(command["slug"])
            spec = async_to_sync(compiled.client.prompt("hi").acall)()
            model = compiled.client.chat_model
            answer = {
                "reply": spec.content(),
                "user_text": model.prompts[-1].user_message.text,
                "snapshot_hash": compiled.snapshot_hash,
                "compiled": id(compiled),
            }
        else:
            chain = AdvisorChain.objects.get(slug=command["slug"])
            version = chain.versions.get(number=command["version"])
            move_label(chain, command["label"], version, reason="from another process")
            answer = {"ok": True}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
