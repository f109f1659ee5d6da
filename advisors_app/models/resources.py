"""Things advisors refer to by slug: sensitive-word lists and prompt templates."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import models

from advisors_app.core.templates import PromptTemplate as CorePromptTemplate
from advisors_app.core.templates import assert_balanced_braces, assert_placeholders

__all__ = ["PromptTemplate", "SensitiveWordList"]


class SensitiveWordList(models.Model):
    """Words a guard blocks (``SafeGuardAdvisor``'s ``sensitive_words``), one per line."""

    slug = models.SlugField(max_length=100, unique=True, help_text="Key advisors refer to.")
    name = models.CharField(max_length=200, blank=True)
    words = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = "sensitive-word list"

    def __str__(self) -> str:
        return self.name or self.slug

    def clean(self) -> None:
        words = [w.strip() for w in self.words or ()]
        if any(not w for w in words):
            raise ValidationError({"words": "Words cannot be blank."})
        # Refused rather than saved with a warning: an empty list blocks nothing, so a guard
        # relying on it would silently let everything through. A guard is switched off by
        # disabling its advisor row, where the chain shows it.
        if not words:
            raise ValidationError(
                {
                    "words": "Enter at least one word: an empty list blocks nothing. To switch "
                    "a guard off, disable its advisor row in the chain."
                }
            )
        # Duplicates are dropped quietly, keeping the first spelling, so the list stays tidy.
        # Spellings differing only in case are kept: a list may serve a case-sensitive guard,
        # and a case-insensitive one reports them as one word (SafeGuardAdvisor).
        self.words = list(dict.fromkeys(words))


class PromptTemplate(models.Model):
    """A prompt template with ``{name}`` placeholders (core ``PromptTemplate``).

    ``placeholders`` declares the names the text uses; :meth:`clean` checks the declaration
    against the text's real ``{name}`` fields in both directions (``{{`` and ``}}`` are literal
    braces), so a template can never fail at render time for lack of a declared value, and
    refuses a brace left unpaired (``{oops``), naming its line and column.
    """

    slug = models.SlugField(max_length=100, unique=True, help_text="Key chains refer to.")
    name = models.CharField(max_length=200, blank=True)
    text = models.TextField(help_text="Placeholders are {name}; write {{ and }} for braces.")
    placeholders = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="The {name} fields the text uses, comma-separated.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = "prompt template"

    def __str__(self) -> str:
        return self.name or self.slug

    def clean(self) -> None:
        declared = [p.strip() for p in self.placeholders or () if p.strip()]
        self.placeholders = list(dict.fromkeys(declared))
        if self.text is None:
            return
        try:
            assert_balanced_braces(self.text)
        except ValueError as exc:
            raise ValidationError({"text": str(exc)}) from exc
        if self.placeholders:
            try:
                assert_placeholders(self.text, self.placeholders)
            except ValueError as exc:
                raise ValidationError({"placeholders": str(exc)}) from exc
        used = CorePromptTemplate(self.text).placeholders
        undeclared = [p for p in used if p not in self.placeholders]
        if undeclared:
            raise ValidationError(
                {
                    "placeholders": "The text uses placeholders that are not declared: "
                    + ", ".join(undeclared)
                }
            )
