"""axe-core accessibility checks for the browser tests (vendored, offline).

``axe_violations(page)`` loads ``advisors_app/static/advisors_app/vendor/axe-core/axe.min.js``
into the page (from the file, so no server or network is needed; evaluated through the DevTools
protocol, which the site's Content-Security-Policy does not stop, where a script element
holding it would be refused as an inline script), runs it on the document as
the page stands and returns the violations of the given impacts, each as a short dict that reads
well in an assertion failure::

    assert axe_violations(page) == []

A violation: ``{"id", "impact", "help", "nodes": [CSS selectors of the offending elements]}``.
Rules are axe's WCAG 2.x A and AA tags plus its best practices, as the axe browser extension
runs them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.live_server import ROOT

__all__ = ["AXE_SCRIPT", "axe_violations"]

AXE_SCRIPT = ROOT / "advisors_app/static/advisors_app/vendor/axe-core/axe.min.js"

_RUN = """
async ({ context, tags }) => {
  const result = await window.axe.run(context || document, {
    runOnly: { type: "tag", values: tags },
    resultTypes: ["violations"],
  });
  return result.violations.map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    nodes: v.nodes.map((n) => n.target.join(" ")),
  }));
}
"""

TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice")


def axe_violations(
    page: Any,
    impacts: Iterable[str] = ("serious", "critical"),
    *,
    context: str | None = None,
    tags: Iterable[str] = TAGS,
) -> list[dict[str, Any]]:
    """axe-core's violations on ``page`` (or inside the ``context`` selector) of ``impacts``.

    ``impacts``: any of ``"minor"``, ``"moderate"``, ``"serious"``, ``"critical"``.
    """
    if not page.evaluate("() => Boolean(window.axe)"):
        page.evaluate(AXE_SCRIPT.read_text(encoding="utf-8") + "\n;void 0")
    wanted = set(impacts)
    found = page.evaluate(_RUN, {"context": context, "tags": list(tags)})
    return [violation for violation in found if violation["impact"] in wanted]
