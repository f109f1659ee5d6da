"""The demo's own data: notes that the ``save_note`` tool writes for a user.

A note is the demo's visible side effect of a tool call: saving one needs the user's approval
(``save_note`` declares ``requires_approval=True``), and the admin lists what was saved.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

__all__ = ["MAX_NOTE_CHARS", "DemoNote"]

#: Longest note the ``save_note`` tool stores, in characters.
MAX_NOTE_CHARS = 2000


class DemoNote(models.Model):
    """A short text a user asked the demo's notes chain to remember (``save_note``).

    ``text`` is at most :data:`MAX_NOTE_CHARS` characters, enforced by the tool (the column
    is unbounded so the limit can change without a migration).
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="demo_notes"
    )
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ("-created_at", "-pk")
        verbose_name = "demo note"

    def __str__(self) -> str:
        return f"#{self.pk}: {self.text[:60]}"
