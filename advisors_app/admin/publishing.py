"""The version workflow on a chain's admin page: publish, diff, promote, roll back, restore.

Every view calls :mod:`advisors_app.definition` (the same functions as the REST API and the
management commands) and checks the same model permissions: publishing needs
``add_chainversion``; moving a label ``change_chainlabel``, and ``promote_production`` too for
``production``; restoring a version into the draft changes the chain, so it needs
``change_advisorchain``. Views that change something answer POST only (with the admin's CSRF
check); a staff user without the permission gets 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from advisors_app.admin.forms import ref_choices
from advisors_app.definition import (
    Checked,
    PublishError,
    VersionLookupError,
    can_move_label,
    can_publish,
    check_draft,
    diff_snapshots,
    move_label,
    publish,
    resolve_snapshot,
    restore_to_draft,
    rollback,
    rollback_target,
)
from advisors_app.definition.runtime import DRAFT
from advisors_app.evaluation.gate import gate_refusal, promotion_evidence
from advisors_app.models import PRODUCTION, AdvisorChain, ChainLabelEvent, ChainVersion
from advisors_app.models.versions import LABEL_NAME_VALIDATOR

__all__ = [
    "ChainWorkflowAdmin",
    "DiffForm",
    "PromoteForm",
    "PublishForm",
    "ReasonForm",
    "diff_display",
    "diff_lines",
]

#: Rows of the version list and of the label history shown on the chain page (the version and
#: label-event admins list them all).
PANEL_ROWS = 20


class PublishForm(forms.Form):
    message = forms.CharField(
        max_length=500,
        widget=forms.TextInput(attrs={"size": 80}),
        help_text="What changed and why; shown in the version list.",
    )


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=500, required=False)


class DiffForm(forms.Form):
    """Two references of one chain to compare: ``draft``, a version number or a label name."""

    def __init__(self, chain: AdvisorChain, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = ref_choices(chain)
        self.fields["from"] = forms.ChoiceField(choices=choices, label="From")
        self.fields["to"] = forms.ChoiceField(choices=choices, label="To")


class PromoteForm(forms.Form):
    """Point a label (an existing one or a new name) at one of the chain's versions."""

    label = forms.CharField(
        max_length=50,
        validators=[LABEL_NAME_VALIDATOR],
        widget=forms.TextInput(attrs={"list": "label-names"}),
        help_text="An existing label or a new name (staging, canary, ...).",
    )
    version = forms.TypedChoiceField(coerce=int, choices=())
    reason = forms.CharField(
        max_length=500,
        required=False,
        widget=forms.TextInput(attrs={"size": 80}),
        help_text="Recorded in the label history.",
    )

    def __init__(self, chain: AdvisorChain, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        versions = [c for c in ref_choices(chain) if c[0] == "Versions"]
        self.fields["version"].choices = versions[0][1] if versions else []


def diff_lines(text: str) -> list[tuple[str, str]]:
    """``(css class, line)`` for each line of a unified diff, for colouring inside ``<pre>``.

    Lines before the first hunk are the ``---``/``+++`` headers; after it, the first character
    says whether a line was added, removed or kept.
    """
    rows = []
    in_hunk = False
    for line in text.splitlines():
        if line.startswith("@@"):
            in_hunk, css = True, "diff-hunk"
        elif not in_hunk:
            css = "diff-file"
        else:
            css = {"+": "diff-add", "-": "diff-del"}.get(line[:1], "")
        rows.append((css, line))
    return rows


def _advisor_name(item: Mapping[str, Any]) -> str:
    return item["type"] if item["occurrence"] == 1 else f"{item['type']} #{item['occurrence']}"


def diff_display(diff: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`~advisors_app.definition.diff_snapshots`' result arranged for the templates."""
    summary = diff["advisors"]
    advisors = [f"added {_advisor_name(a)}" for a in summary["added"]]
    advisors += [f"removed {_advisor_name(a)}" for a in summary["removed"]]
    if summary["reordered"]:
        advisors.append("the advisors run in a different order")
    for item in summary["changed"]:
        what = [f"param {p}" for p in item["params"]] + list(item["fields"])
        advisors.append(f"changed {_advisor_name(item)}: {', '.join(what)}")
    return {
        "changed": diff["changed"],
        "chain_fields": diff["chain"],
        "system_prompt": diff_lines(diff["system_prompt"]),
        "advisors": advisors,
        "templates": [
            {"slug": t["slug"], "lines": diff_lines(t["diff"])} for t in diff["templates"]
        ],
        "word_lists": diff["word_lists"],
        "lines": diff_lines(diff["text"]),
    }


class ChainWorkflowAdmin(admin.ModelAdmin):
    """The chain admin's version views and the version panel of its change page."""

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        name = "advisors_app_advisorchain_"
        views = [
            path("<path:object_id>/publish/", wrap(self.publish_view), name=name + "publish"),
            path("<path:object_id>/diff/", wrap(self.diff_view), name=name + "diff"),
            path("<path:object_id>/promote/", wrap(self.promote_view), name=name + "promote"),
            path(
                "<path:object_id>/labels/<str:label>/rollback/",
                wrap(require_POST(self.rollback_view)),
                name=name + "rollback",
            ),
            path(
                "<path:object_id>/versions/<int:number>/restore/",
                wrap(require_POST(self.restore_view)),
                name=name + "restore",
            ),
        ]
        return [*views, *super().get_urls()]

    # Permissions (the same rules as the REST API's).

    def may_publish(self, request: HttpRequest, chain: AdvisorChain) -> bool:
        return self.has_view_or_change_permission(request, chain) and can_publish(request.user)

    def may_promote(self, request: HttpRequest, chain: AdvisorChain) -> bool:
        """May move some label (which one is checked on submit: production needs more)."""
        return self.has_view_or_change_permission(request, chain) and request.user.has_perm(
            "advisors_app.change_chainlabel"
        )

    def may_move(self, request: HttpRequest, chain: AdvisorChain, label: str) -> bool:
        return self.has_view_or_change_permission(request, chain) and can_move_label(
            request.user, label
        )

    # Shared pieces.

    def _chain_or_403(self, request: HttpRequest, object_id: str, allowed: Any) -> AdvisorChain:
        chain = self.get_object(request, object_id)
        if chain is None:
            raise Http404(f"No advisor chain with id {object_id!r}.")
        if not allowed(request, chain):
            raise PermissionDenied
        return chain

    def _page(
        self, request: HttpRequest, chain: AdvisorChain, title: str, page: str, **extra: Any
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": chain,
            "title": f"{title}: {chain}",
            "page": title,
            "change_url": _change_url(chain),
            **extra,
        }
        return TemplateResponse(request, f"admin/advisors_app/advisorchain/{page}.html", context)

    # Views.

    def publish_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Store the draft as a new version; lint and build errors are form errors."""
        chain = self._chain_or_403(request, object_id, self.may_publish)
        form = PublishForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                version, created = publish(
                    chain, message=form.cleaned_data["message"], user=request.user
                )
            except PublishError as exc:
                form.add_error(None, [f"{m.id}: {m}" for m in exc.messages])
            else:
                if created:
                    messages.success(request, f"Published v{version.number}.")
                else:
                    messages.info(
                        request, f"The draft is unchanged since v{version.number}: nothing new."
                    )
                return HttpResponseRedirect(_change_url(chain) + "#versions")
        checked = check_draft(chain)
        newest = chain.versions.order_by("-number").first()
        diff = None
        if newest is not None:
            diff = diff_display(
                diff_snapshots(newest.snapshot, checked.snapshot, names=(str(newest), DRAFT))
            )
        return self._page(
            request,
            chain,
            "Publish",
            "publish",
            form=form,
            findings=checked.messages,
            newest=newest,
            diff=diff,
        )

    def diff_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Compare two of: the draft, a version, a label (``?from=…&to=…``)."""
        chain = self._chain_or_403(request, object_id, self.has_view_or_change_permission)
        newest = chain.versions.order_by("-number").values_list("number", flat=True).first()
        if chain.labels.filter(name=PRODUCTION).exists():
            default_from = PRODUCTION
        else:
            default_from = DRAFT if newest is None else str(newest)
        data = request.GET if "from" in request.GET else {"from": default_from, "to": DRAFT}
        form = DiffForm(chain, data)
        diff = names = None
        if form.is_valid():
            try:
                before = resolve_snapshot(chain, form.cleaned_data["from"])
                after = resolve_snapshot(chain, form.cleaned_data["to"])
            except VersionLookupError as exc:  # moved or gone since the choices were read
                form.add_error(None, str(exc))
            else:
                names = (before[0], after[0])
                diff = diff_display(diff_snapshots(before[1], after[1], names=names))
        return self._page(request, chain, "Diff", "diff", form=form, diff=diff, names=names)

    def promote_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Point a label at a version, after showing what changes for its callers."""
        chain = self._chain_or_403(request, object_id, self.may_promote)
        newest = chain.versions.order_by("-number").first()
        if newest is None:
            messages.error(request, "Publish a version first: there is nothing to promote.")
            return HttpResponseRedirect(_change_url(chain))
        if request.method == "POST":
            data: Any = request.POST
        else:  # links preselect a label and a version; the preview shows for any choice
            data = {
                "label": request.GET.get("label", PRODUCTION),
                "version": request.GET.get("version", newest.number),
                "reason": request.GET.get("reason", ""),
            }
        form = PromoteForm(chain, data)
        preview = None
        if form.is_valid():
            name, number = form.cleaned_data["label"], form.cleaned_data["version"]
            version = chain.versions.get(number=number)
            # "Show what changes" posts the form too (its CSRF token stays out of the URL).
            if request.method == "POST" and "preview" not in request.POST:
                return self._promote(request, chain, name, version, form)
            preview = self._preview(request, chain, name, version)
        return self._promote_page(request, chain, form, preview)

    def _promote_page(
        self, request: HttpRequest, chain: AdvisorChain, form: PromoteForm, preview: Any
    ) -> HttpResponse:
        return self._page(
            request,
            chain,
            "Promote",
            "promote",
            form=form,
            preview=preview,
            label_names=list(chain.labels.order_by("name").values_list("name", flat=True)),
        )

    def _promote(
        self,
        request: HttpRequest,
        chain: AdvisorChain,
        name: str,
        version: ChainVersion,
        form: PromoteForm,
    ) -> HttpResponse:
        if not self.may_move(request, chain, name):
            raise PermissionDenied
        refused = gate_refusal(chain, name, version)
        if refused:  # the chain's promotion gate: the version is not shown to be no worse
            for reason in refused:
                form.add_error(None, reason)
            return self._promote_page(request, chain, form, None)
        before = chain.labels.select_related("version").filter(name=name).first()
        try:
            move_label(chain, name, version, user=request.user, reason=form.cleaned_data["reason"])
        except ValidationError as exc:
            form.add_error("label", exc)
            return self._promote_page(request, chain, form, None)
        if before is None:
            messages.success(request, f"Created label {name} at {version}.")
        elif before.version_id == version.pk:
            messages.info(request, f"{name} already serves {version}: nothing to record.")
        else:
            messages.success(request, f"Moved {name} from {before.version} to {version}.")
        return HttpResponseRedirect(_change_url(chain) + "#labels")

    def _preview(
        self, request: HttpRequest, chain: AdvisorChain, name: str, version: ChainVersion
    ) -> dict[str, Any]:
        current = chain.labels.select_related("version").filter(name=name).first()
        diff = None
        if current is not None:
            diff = diff_display(
                diff_snapshots(
                    current.version.snapshot,
                    version.snapshot,
                    names=(f"{name} ({current.version})", str(version)),
                )
            )
        return {
            "name": name,
            "version": version,
            "current": current.version if current else None,
            "diff": diff,
            "allowed": self.may_move(request, chain, name),
            "evaluation": promotion_evidence(version.pk, current.version_id if current else None),
            "gate": gate_refusal(chain, name, version),
        }

    def rollback_view(self, request: HttpRequest, object_id: str, label: str) -> HttpResponse:
        """Move ``label`` back to the version it pointed at before its last move."""
        chain = self._chain_or_403(request, object_id, lambda r, c: self.may_move(r, c, label))
        form = ReasonForm(request.POST)
        if not form.is_valid():
            messages.error(request, f"Not rolled back: {form.errors['reason'][0]}")
            return HttpResponseRedirect(_change_url(chain) + "#labels")
        before = chain.labels.select_related("version").filter(name=label).first()
        try:
            moved = rollback(chain, label, user=request.user, reason=form.cleaned_data["reason"])
        except VersionLookupError as exc:
            messages.error(request, str(exc))
        else:
            assert before is not None  # rollback() raised otherwise
            messages.success(
                request, f"Rolled {label} back from {before.version} to {moved.version}."
            )
        return HttpResponseRedirect(_change_url(chain) + "#labels")

    def restore_view(self, request: HttpRequest, object_id: str, number: int) -> HttpResponse:
        """Copy a version's definition into the draft rows; the snapshot's notes as warnings."""
        chain = self._chain_or_403(request, object_id, self.has_change_permission)
        version = chain.versions.filter(number=number).first()
        if version is None:
            raise Http404(f"Chain {chain.slug!r} has no version {number}.")
        notes = restore_to_draft(version)
        messages.success(
            request,
            f"The draft now holds {version}'s definition; publishing it makes a new version "
            f"whose parent is {version}.",
        )
        for note in notes:
            messages.warning(request, note)
        return HttpResponseRedirect(_change_url(chain))

    # The change page.

    def version_panel(
        self, request: HttpRequest, chain: AdvisorChain, checked: Checked
    ) -> dict[str, Any]:
        """Context for the chain page: the draft-vs-production banner, versions, labels and
        the label history, with the buttons this user may use."""
        labels = list(chain.labels.select_related("version").order_by("name"))
        production = next((lb for lb in labels if lb.name == PRODUCTION), None)
        versions = list(
            chain.versions.select_related("created_by", "parent").order_by("-number")[:PANEL_ROWS]
        )
        names: dict[int, list[str]] = {}
        for label in labels:
            names.setdefault(label.version_id, []).append(label.name)
        targets = {label.pk: rollback_target(label) for label in labels}
        matching = chain.versions.filter(snapshot_hash=checked.snapshot_hash).first()
        events = ChainLabelEvent.objects.filter(label__chain=chain).select_related(
            "label", "from_version", "to_version", "actor"
        )[:PANEL_ROWS]
        restore = self.has_change_permission(request, chain)
        return {
            "draft": {
                "production": production.version if production else None,
                "differs": production is None
                or production.version.snapshot_hash != checked.snapshot_hash,
                "matching": matching,
                "has_errors": bool(checked.errors),
            },
            "versions": [
                {"version": v, "labels": names.get(v.pk, []), "restore": restore} for v in versions
            ],
            "version_total": chain.versions.count(),
            "labels": [
                {
                    "label": label,
                    "rollback": targets[label.pk]
                    if self.may_move(request, chain, label.name)
                    else None,
                }
                for label in labels
            ],
            "label_events": events,
            "can_publish": can_publish(request.user),
            "can_promote": request.user.has_perm("advisors_app.change_chainlabel"),
        }


def _change_url(chain: AdvisorChain) -> str:
    return reverse("admin:advisors_app_advisorchain_change", args=[chain.pk])
