"""Advisor chains and their advisor configurations: a chain as data, edited in the admin.

A chain row plus its advisor rows is the chain's editable *draft*. Turns never run the draft
directly: publishing turns it into an immutable :class:`~advisors_app.models.ChainVersion`
(:mod:`advisors_app.definition`), and labels choose which version callers get. Only the
chain's ``enabled`` flag acts at once: a disabled chain serves nobody.
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
from advisors_app.core.templates import assert_balanced_braces

from .model_configs import ChatModelConfig
from .resources import PromptTemplate

__all__ = ["AdvisorChain", "AdvisorConfig", "VersionPolicy"]


class VersionPolicy(models.TextChoices):
    """What version a conversation's later turns run (:attr:`AdvisorChain.version_policy`)."""

    PIN = "pin", "Keep the version the conversation started on"
    FOLLOW_LABEL = "follow_label", "Follow the label"


class AdvisorChain(models.Model):
    """A named chain: a chat model, a system prompt, default options, tools and advisors."""

    slug = models.SlugField(max_length=100, unique=True, help_text="Used in URLs and the API.")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    chat_model = models.ForeignKey(
        ChatModelConfig,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="chains",
        help_text="Blank: the model configuration named by ADVISORS['DEFAULT_CHAT_MODEL'].",
    )
    system_prompt = models.TextField(blank=True, help_text="Default system text.")
    system_template = models.ForeignKey(
        PromptTemplate,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="chains",
        help_text="A stored template instead of the system text; its placeholders are filled "
        'from the request\'s params["system_params"].',
    )
    default_options = models.JSONField(
        default=dict,
        blank=True,
        help_text='Chat options as JSON, e.g. {"temperature": 0.2, "max_tokens": 512}.',
    )
    tools = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="Names of tools from advisors_app.tools.tool_registry, comma-separated.",
    )
    enabled = models.BooleanField(default=True, help_text="Off: the chain serves nobody.")
    version_policy = models.CharField(
        max_length=16,
        choices=VersionPolicy.choices,
        default=VersionPolicy.PIN,
        help_text="Which version a continued conversation runs: the one it started on, or "
        "whatever its label points at now.",
    )
    #: Set by "restore to draft": the next version published from this draft names it as parent.
    restored_from = models.ForeignKey(
        "advisors_app.ChainVersion",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="+",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = "advisor chain"

    def __str__(self) -> str:
        return self.name or self.slug

    def clean(self) -> None:
        from advisors_app.validation import chat_options_errors

        errors: dict[str, list[str]] = {}
        if self.system_prompt.strip() and self.system_template_id is not None:
            errors["system_template"] = ["Set the system text or a template, not both."]
        if self.system_template_id is not None:
            try:  # a template saved before the admin refused unpaired braces
                assert_balanced_braces(self.system_template.text)
            except ValueError as exc:
                errors.setdefault("system_template", []).append(
                    f"Template {self.system_template.slug!r}: {exc}"
                )
        for field, messages in chat_options_errors(self.default_options, "").items():
            errors.setdefault("default_options", []).extend(
                f"{field}: {m}" if field else m for m in messages
            )
        tool_errors = unknown_tool_errors(self.tools or [])
        if tool_errors:
            errors["tools"] = tool_errors
        if errors:
            raise ValidationError(errors)


def unknown_tool_errors(names: list[str]) -> list[str]:
    """One message naming the tools in ``names`` that are not registered (none: ``[]``)."""
    from advisors_app.definition.registry import registered_tool_names

    known = registered_tool_names()
    unknown = [n for n in names if n not in known]
    if not unknown:
        return []
    listing = ", ".join(sorted(known)) or "none"
    return [f"Unknown tool(s): {', '.join(unknown)}. Registered tools: {listing}."]


class AdvisorConfig(models.Model):
    """One advisor of a chain: a registered type key, its order, and its params as JSON.

    ``advisor_type`` must be a key of ``advisors_app.definition.registry`` (never an import path);
    ``params`` must match that type's JSON Schema; a blank ``order`` means the type's default.
    """

    chain = models.ForeignKey(AdvisorChain, on_delete=models.CASCADE, related_name="advisors")
    advisor_type = models.CharField(max_length=100, help_text="A registered advisor type.")
    order = models.IntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(HIGHEST_PRECEDENCE), MaxValueValidator(LOWEST_PRECEDENCE)],
        help_text="Smaller runs first (outer). Blank: the type's default. "
        "Accepts HIGHEST+N and LOWEST-N.",
    )
    enabled = models.BooleanField(default=True)
    params = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["chain", "id"]
        verbose_name = "advisor"

    def __str__(self) -> str:
        from advisors_app.orders import format_order

        return f"{self.advisor_type} at {format_order(self.effective_order)}"

    @property
    def effective_order(self) -> int | None:
        """``order``, or the type's default order when blank (``None`` for an unknown type)."""
        if self.order is not None:
            return self.order
        from advisors_app.definition.registry import advisor_types

        advisor_type = advisor_types.get(self.advisor_type)
        return advisor_type.default_order if advisor_type else None

    def clean_fields(self, exclude: Any = None) -> None:
        """Field checks, then the type key and params against the type's JSON Schema.

        Skipped for a field a form already refused (``exclude``), so invalid JSON gets one
        error, not a second one about the value that replaced it.
        """
        from advisors_app.definition.registry import params_errors

        errors: dict[str, Any] = {}
        try:
            super().clean_fields(exclude)
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        skip = set(exclude or ()) | set(errors)
        if not {"advisor_type", "params"} & skip:
            for field, messages in _model_errors(
                params_errors(self.advisor_type, self.params)
            ).items():
                errors.setdefault(field, []).extend(messages)
        if errors:
            raise ValidationError(errors)


def _model_errors(errors: dict[str, list[str]]) -> dict[str, Any]:
    """``{"params.top_k": [...]}`` → ``{"params": ["top_k: ..."]}`` (model fields only)."""
    result: dict[str, list[str]] = {}
    for path, messages in errors.items():
        field, _, rest = path.partition(".")
        result.setdefault(field, []).extend(f"{rest}: {m}" if rest else m for m in messages)
    return result
