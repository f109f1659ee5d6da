"""The picture of a chain: layers from the snapshot, outermost first, with the call and stream
paths; drawn on the chain page and, with each advisor's time, in the playground."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser

import pytest
from django.test import Client

from advisors_app.admin.chain_picture import annotate, chain_picture, layer_names
from advisors_app.core import HIGHEST_PRECEDENCE
from advisors_app.definition import resolve_draft
from advisors_app.definition.runtime import clear_cache
from advisors_app.demo.loader import MAIN_CHAIN, ensure_demo_rows
from advisors_app.models import AdvisorChain
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


class _Layers(HTMLParser):
    """The ``data-type`` of each ``g.cp-layer`` of a page, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.types: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "g" and "cp-layer" in (found.get("class") or ""):
            self.types.append(found.get("data-type") or "")


def drawn_layers(page: str) -> list[str]:
    parser = _Layers()
    parser.feed(page)
    return parser.types


def test_the_demo_chain_is_an_onion_from_guard_to_model() -> None:
    ensure_demo_rows()
    chain = AdvisorChain.objects.get(slug=MAIN_CHAIN)
    picture = chain_picture(resolve_draft(chain))
    assert layer_names(picture) == [
        "safe_guard",
        "guard",
        "session_memory",
        "retrieval_augmentation",
        "tool_calling",
        "simple_logger",
    ]
    assert [layer.position for layer in picture.layers] == [1, 2, 3, 4, 5, 6]
    roles = [layer.role for layer in picture.layers[:5]]
    assert roles == ["guard", "guard", "memory", "rag", "tool"]
    assert picture.layers[0].order_text == "HIGHEST+100"
    assert all(layer.call and layer.stream for layer in picture.layers)


def test_disabled_rows_and_an_added_tool_loop() -> None:
    chain = make_chain(
        advisors=(("append", {"text": "!"}, HIGHEST_PRECEDENCE + 500), ("safe_guard", {}))
    )
    row = chain.advisors.get(advisor_type="safe_guard")
    row.enabled = False
    row.save()
    snapshot = {**resolve_draft(chain), "tools": [{"name": "lookup"}]}
    picture = chain_picture(snapshot)
    assert layer_names(picture) == ["tool_calling", "append"]
    assert picture.layers[0].added and picture.layers[0].order_text == "HIGHEST+300"
    assert [layer.key for layer in picture.disabled] == ["safe_guard"]
    assert picture.tools == ("lookup",)


def test_annotate_sums_each_advisors_runs_and_lists_the_rest() -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    picture = chain_picture(resolve_draft(chain))
    order = picture.layers[0].order
    trace = {
        "entries": [
            {
                "index": 0,
                "parent": None,
                "name": "AppendAdvisor",
                "order": order,
                "duration": 0.010,
                "self_duration": 0.002,
            },
            {
                "index": 1,
                "parent": 0,
                "name": "Inner",
                "order": order + 1,
                "duration": 0.008,
                "self_duration": 0.001,
            },
            {
                "index": 2,
                "parent": 1,
                "name": "call",
                "order": 2**31 - 1,
                "duration": 0.007,
                "self_duration": 0.007,
            },
        ]
    }
    annotated = annotate(picture, trace)
    layer = annotated.layers[0]
    assert (layer.runs, layer.total, layer.own) == (1, 0.010, 0.002)
    assert annotated.model_total == 0.007 and annotated.model_runs == 1
    assert [extra["name"] for extra in annotated.extras] == ["Inner"]
    empty = annotate(picture, None)
    assert empty.layers[0].runs == 0 and empty.model_total is None


def test_the_chain_page_draws_the_picture(admin_client: Client) -> None:
    ensure_demo_rows()
    chain = AdvisorChain.objects.get(slug=MAIN_CHAIN)
    page = admin_client.get(f"/admin/advisors_app/advisorchain/{chain.pk}/change/")
    html = page.content.decode()
    assert 'id="chain-picture-panel"' in html
    assert drawn_layers(html) == [
        "safe_guard",
        "guard",
        "session_memory",
        "retrieval_augmentation",
        "tool_calling",
        "simple_logger",
    ]
    assert "<title id=" in html and "<desc id=" in html
    assert "From outermost to innermost" in html
    assert "not known" not in html  # every built-in type names its class
    figure = html.split('<figure class="chain-picture"')[1].split("</figure>")[0]
    assert "<script" not in figure and "href=" not in figure  # nothing to fetch


def test_the_playground_annotates_the_picture_with_times(admin_client: Client) -> None:
    chain = make_chain(
        model=scripted_model(responses=("Hi.",)), advisors=(("append", {"text": "!"}),)
    )
    response = admin_client.post(
        f"/admin/advisors_app/advisorchain/{chain.pk}/playground/", {"message": "hello"}
    )
    html = response.content.decode()
    assert drawn_layers(html) == ["append"]
    picture = response.context["picture"]["picture"]
    assert picture.annotated and picture.layers[0].runs == 1
    assert picture.layers[0].total > 0 and picture.model_total is not None
    assert 'data-time="' in html and "(own " in html
    assert "Ran the draft." in html
    assert "not known (the type has no advisor class)" in html  # the test plugin's type
