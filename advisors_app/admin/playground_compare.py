"""The playground's compare page (issue 24): one message sent to two things a chain can run —
its draft, a label or a version — shown side by side: replies, final prompts, traces and the
annotated pictures of both.

``/admin/advisors_app/advisorchain/<id>/playground/compare/``, for editors of the chain (running
a chain spends model time, as in the playground). Each side runs as a turn of its own, through
the same service as the playground (:meth:`AdvisorChainAdmin._run`), each in a new conversation,
so neither answer sees the other's history; both are logged as usual.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied, ValidationError
from django.forms import Textarea
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from advisors_app.admin.forms import BlankJSONField, ref_choices
from advisors_app.definition import resolve_draft, snapshot_hash
from advisors_app.definition.runtime import DRAFT
from advisors_app.models import AdvisorChain

__all__ = ["PlaygroundCompareForm", "playground_compare", "run_target"]

#: The sides of the page, left then right.
SIDES = ("left", "right")


def run_target(ref: str) -> dict[str, Any]:
    """``call_turn``'s ``label`` or ``version`` for a reference (``draft``, a version number or
    a label name; blank: the draft)."""
    ref = ref or DRAFT
    if ref == DRAFT:
        return {"version": DRAFT}
    if ref.isascii() and ref.isdigit():
        return {"version": int(ref)}
    return {"label": ref}


class PlaygroundCompareForm(forms.Form):
    """A message and the two things of the chain to send it to."""

    left = forms.ChoiceField(label="Left", help_text="Draft, a label or a version.")
    right = forms.ChoiceField(label="Right", help_text="Compared with the left.")
    message = forms.CharField(widget=Textarea(attrs={"rows": 3, "cols": 80}), strip=False)
    params = BlankJSONField(
        required=False,
        widget=Textarea(attrs={"rows": 2, "cols": 80}),
        help_text='Request params for both, e.g. {"options": {"temperature": 0.2}}.',
    )

    def __init__(self, *args: Any, chain: AdvisorChain, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.chain = chain
        choices = ref_choices(chain)
        self.fields["left"].choices = choices
        self.fields["right"].choices = choices
        if not self.is_bound:
            # The usual question: the draft against what users get now.
            production = chain.labels.filter(name="production").exists()
            self.initial.setdefault("left", DRAFT)
            self.initial.setdefault("right", "production" if production else DRAFT)

    def clean_params(self) -> Any:
        value = self.cleaned_data.get("params")
        return {} if value is None else value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        left, right = data.get("left"), data.get("right")
        if left and right and self._same(left, right):
            raise ValidationError(
                "Choose two different things to compare: these run the same chain (the same "
                "one twice, a label and the version it points at, or a draft equal to that "
                "version) and would only show the model's randomness; send the message twice "
                "in the playground for that."
            )
        return data

    def _same(self, left: str, right: str) -> bool:
        """Whether both run the same thing: the same reference, a label and the version it
        points at, or the draft and a version whose snapshot it equals."""
        if left == right:
            return True
        runs = [self._runs(ref) for ref in (left, right)]
        if None in runs:
            return False  # a label gone since the page was drawn: the run says so
        if DRAFT not in runs:
            return runs[0] == runs[1]
        number = runs[1] if runs[0] == DRAFT else runs[0]
        draft = snapshot_hash(resolve_draft(self.chain))
        return bool(self.chain.versions.filter(number=number, snapshot_hash=draft).exists())

    def _runs(self, ref: str) -> int | str | None:
        """What a reference runs: a version number, ``DRAFT``, or ``None`` (no such label)."""
        target = run_target(ref)
        if "label" in target:
            found = self.chain.labels.filter(name=target["label"]).select_related("version")
            label = found.first()
            return label.version.number if label else None
        version = target["version"]
        return version if isinstance(version, int) else DRAFT


def _summary(sides: list[dict[str, Any]]) -> list[str]:
    """What differs between the two sides, in a few words each."""
    results = [side["outcome"].get("result") for side in sides]
    if not all(results):
        return []
    left, right = results
    notes = ["Same reply." if left.content == right.content else "The replies differ."]
    prompts = [side["outcome"].get("prompt_messages") for side in sides]
    notes.append("Same final prompt." if prompts[0] == prompts[1] else "The final prompts differ.")
    return notes


def playground_compare(model_admin: Any, request: HttpRequest, object_id: str) -> HttpResponse:
    """The compare page (``GET``: the form; ``POST``: run both sides and show them)."""
    chain = model_admin.get_object(request, object_id)
    if chain is None:
        return model_admin._get_obj_does_not_exist_redirect(request, model_admin.opts, object_id)
    if not model_admin.has_change_permission(request, chain):
        raise PermissionDenied
    form = PlaygroundCompareForm(request.POST or None, chain=chain)
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "original": chain,
        "title": f"Compare in the playground: {chain}",
        "form": form,
        "change_url": reverse("admin:advisors_app_advisorchain_change", args=[chain.pk]),
        "playground_url": reverse("admin:advisors_app_advisorchain_playground", args=[chain.pk]),
    }
    if request.method == "POST" and form.is_valid():
        data = {
            "message": form.cleaned_data["message"],
            "conversation_id": "",  # a new conversation each: neither sees the other's turn
            "params": form.cleaned_data["params"],
        }
        sides = []
        for side in SIDES:
            ref = form.cleaned_data[side]
            outcome = model_admin._run(request, chain, data, run_target(ref))
            sides.append({"side": side, "ref": ref, "outcome": outcome})
        context["sides"] = sides
        context["summary"] = _summary(sides)
    return TemplateResponse(
        request, "admin/advisors_app/advisorchain/playground_compare.html", context
    )
