"""Admin of scores (issue 22, "Feedback"): every judgement of a reply, filterable by chain,
chain version, key, source and reason, each row linking to the reply's conversation and to
the call log of the turn it judges.

Read-only but deletable: votes are written by their authors (the chat page, the feedback
endpoint). Staff with ``advisors_app.add_score`` rate a reply themselves on its **rate page**
(``/admin/advisors_app/score/rate/<message id>/``, linked from each reply of a conversation's
transcript and from a call log's page): a value under a key (👍/👎 for ``thumbs``), a reason,
a comment and a correction — stored as ``reviewer`` scores, one per reply, key and reviewer,
through :func:`advisors_app.evaluation.feedback.record_review`. "Add to dataset" turns the replies
of the
selected scores into dataset items (:class:`~advisors_app.admin.evaluation.AddToDatasetMixin`;
a correction becomes the expected output).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from advisors_app.admin.evaluation import AddToDatasetMixin
from advisors_app.admin.widgets import Textarea
from advisors_app.core.messages import MessageType
from advisors_app.evaluation.curation import replies_of_scores, user_message_of
from advisors_app.evaluation.feedback import (
    CORRECTION,
    THUMBS,
    FeedbackError,
    parse_vote,
    record_review,
    withdraw_review,
)
from advisors_app.models import ChatMessage, Score
from advisors_app.models.scores import MAX_COMMENT_LENGTH, REASONS
from advisors_app.security.bidi import isolated

__all__ = ["REVIEW_PERMISSION", "ReviewForm", "ScoreAdmin", "review_cell"]

#: Django's model permission a reviewer needs to rate replies in the admin.
REVIEW_PERMISSION = "advisors_app.add_score"
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")

#: Characters of the judged reply the list shows.
EXCERPT_CHARS = 80


def rate_url(reply: ChatMessage, back: str = "") -> str:
    """The rate page of ``reply`` (returning to ``back`` once saved)."""
    url = reverse("admin:advisors_app_score_rate", args=[reply.pk])
    return f"{url}?{urlencode({'next': back})}" if back else url


def _score_text(score: Score) -> str:
    if score.key == CORRECTION:
        return f"correction: {Truncator(score.comment).chars(EXCERPT_CHARS)}"
    return " ".join(part for part in (score.key, score.display_value(), score.reason) if part)


def review_cell(reply: ChatMessage, back: str) -> SafeString:
    """A reply's scores (``thumbs 👎 wrong (alice, user)``) and its "Rate" link."""
    scores = format_html_join(
        "",
        '<span class="reply-score">{} ({}, {})</span><br>',
        (
            (
                isolated(_score_text(score)),
                score.author.get_username() if score.author else "-",
                score.source,
            )
            for score in reply.scores.all()
        ),
    )
    return format_html('{}<a href="{}">Rate</a>', scores, rate_url(reply, back))


def _typed(text: str) -> Any:
    """A form's value as JSON would send it: ``true``/``false``, a number, else the label."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return float(text) if _NUMBER.match(text) else text


class ReviewForm(forms.Form):
    """A reviewer's score on one reply under ``key``, and their correction of it."""

    key = forms.CharField(max_length=64, initial=THUMBS, required=False, help_text="Blank: thumbs.")
    value = forms.CharField(
        required=False,
        max_length=100,
        help_text='For thumbs "up" or "down"; otherwise true/false, a number or a label. '
        "Blank: keep the score under this key as it is.",
    )
    reason = forms.ChoiceField(choices=[("", "---------"), *REASONS.items()], required=False)
    comment = forms.CharField(
        required=False,
        max_length=MAX_COMMENT_LENGTH,
        widget=Textarea(attrs={"rows": 3, "cols": 80}),
    )
    correction = forms.CharField(
        required=False,
        max_length=MAX_COMMENT_LENGTH,
        strip=False,
        widget=Textarea(attrs={"rows": 5, "cols": 80}),
        help_text='The answer the reply should have given ("add to dataset" expects it); '
        "blank: no correction of yours.",
    )

    def clean_key(self) -> str:
        return self.cleaned_data["key"].strip() or THUMBS

    def save(self, user: Any, reply: ChatMessage, correction_before: str) -> list[str]:
        """Store the score and the correction (what changed, for the message). Raises
        :class:`~advisors_app.evaluation.feedback.FeedbackError` with the field errors."""
        data = self.cleaned_data
        done = []
        if data["value"].strip():
            vote = {"key": data["key"], "value": _typed(data["value"].strip())}
            vote |= {"reason": data["reason"], "comment": data["comment"]}
            score, _ = record_review(user, parse_vote(vote, message_id=reply.pk))
            assert score is not None
            done.append(f"{score.key} = {score.display_value()}")
        correction = data["correction"].strip()
        if correction != correction_before.strip():
            if correction:
                vote = {"key": CORRECTION, "value": True, "comment": correction}
                try:
                    record_review(user, parse_vote(vote, message_id=reply.pk))
                except FeedbackError as exc:
                    exc.fields = {"correction": exc.fields.get("comment", [exc.message])}
                    raise
                done.append("correction saved")
            else:
                withdraw_review(user, reply.pk, CORRECTION)
                done.append("correction removed")
        return done


@admin.register(Score)
class ScoreAdmin(AddToDatasetMixin, admin.ModelAdmin):
    list_display = (
        "created_at",
        "key",
        "shown_value",
        "reason",
        "source",
        "message_excerpt",
        "author",
        "chain_slug",
        "chain_version",
        "call_log_link",
    )
    list_filter = ("chain_slug", "chain_version", "key", "source", "reason", "created_at")
    date_hierarchy = "created_at"
    search_fields = ("key", "comment", "chain_slug", "author__username", "call_log__trace_id")
    list_select_related = ("author", "message", "chain_version__chain", "call_log")
    fields = (
        "key",
        "shown_value",
        "value_type",
        "reason",
        "comment",
        "source",
        "author",
        "message_excerpt",
        "call_log_link",
        "chain_slug",
        "chain_version",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("add_to_dataset",)

    def dataset_replies(self, queryset: QuerySet[Score]) -> tuple[list[ChatMessage], list[str]]:
        return replies_of_scores(queryset.select_related("message").order_by("created_at", "pk"))

    def get_urls(self) -> list[URLPattern]:
        rate = path(
            "rate/<int:message_id>/",
            self.admin_site.admin_view(self.rate_view),
            name="advisors_app_score_rate",
        )
        return [rate, *super().get_urls()]

    def rate_view(self, request: HttpRequest, message_id: int) -> HttpResponse:
        """A reviewer's rating of one reply (see the module docstring)."""
        if not request.user.has_perm(REVIEW_PERMISSION):
            raise PermissionDenied
        reply = get_object_or_404(
            ChatMessage.objects.select_related("conversation"),
            pk=message_id,
            message_type=MessageType.ASSISTANT.value,
        )
        back = request.POST.get("next") or request.GET.get("next") or ""
        if not url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
            back = ""
        mine = Score.objects.filter(
            message_id=reply.pk, author_id=request.user.pk, source=Score.Source.REVIEWER
        )
        correction = mine.filter(key=CORRECTION).values_list("comment", flat=True).first() or ""
        if request.method == "POST":
            form = ReviewForm(request.POST)
            if "withdraw" in request.POST:
                key = request.POST.get("key") or THUMBS
                try:
                    removed = withdraw_review(request.user, reply.pk, key)
                except FeedbackError as exc:
                    form.is_valid()
                    form.add_error("key", exc.errors.get("key", [exc.message]))
                else:
                    done = f"Your {key} score removed." if removed else "No such score of yours."
                    self.message_user(request, done, messages.SUCCESS)
                    return HttpResponseRedirect(back or rate_url(reply))
            elif form.is_valid():
                try:
                    done = form.save(request.user, reply, correction)
                except FeedbackError as exc:
                    for name, problems in exc.errors.items():
                        form.add_error(name if name in form.fields else None, problems)
                else:
                    text = "; ".join(done) or "Nothing to save: give a value or a correction."
                    level = messages.SUCCESS if done else messages.WARNING
                    self.message_user(request, f"Reply {reply.pk}: {text}.", level)
                    return HttpResponseRedirect(back or rate_url(reply))
        else:
            key = request.GET.get("key") or THUMBS
            current = mine.filter(key=key).first()
            initial: dict[str, Any] = {"key": key, "correction": correction}
            if current is not None:
                value = current.value
                if key == THUMBS:
                    value = "up" if value else "down"
                elif isinstance(value, bool):
                    value = "true" if value else "false"
                initial |= {"value": value, "reason": current.reason, "comment": current.comment}
            form = ReviewForm(initial=initial)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Rate reply {reply.pk}",
            "reply": reply,
            "asked": user_message_of(reply),
            "scores": reply.scores.select_related("author").order_by("source", "key"),
            "form": form,
            "back": back,
            "conversation_url": reverse(
                "admin:advisors_app_conversation_change", args=[reply.conversation_id]
            ),
        }
        return TemplateResponse(request, "admin/advisors_app/score/rate.html", context)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Value", ordering="numeric_value")
    def shown_value(self, obj: Score) -> str:
        return obj.display_value()

    @admin.display(description="Reply")
    def message_excerpt(self, obj: Score) -> str:
        """The judged reply's start, linking to its conversation's transcript."""
        message = obj.message
        if message is None:
            return "-"
        text = Truncator(" ".join(message.text.split())).chars(EXCERPT_CHARS) or "(no text)"
        url = reverse("admin:advisors_app_conversation_change", args=[message.conversation_id])
        return format_html('<a href="{}">{}</a>', url, isolated(text))

    @admin.display(description="Call log")
    def call_log_link(self, obj: Score) -> str:
        if obj.call_log_id is None:
            return "-"
        url = reverse("admin:advisors_app_calllog_change", args=[obj.call_log_id])
        return format_html('<a href="{}">{}</a>', url, obj.call_log.trace_id)
