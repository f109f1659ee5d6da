"""The demo's notes in the admin: a read-only list of what ``save_note`` stored."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import DemoNote


@admin.register(DemoNote)
class DemoNoteAdmin(admin.ModelAdmin):
    """Notes are written by the tool only (after the user's approval), never by hand."""

    list_display = ("id", "owner", "text", "created_at")
    list_filter = ("created_at",)
    search_fields = ("text", "owner__username")
    readonly_fields = ("owner", "text", "created_at")
    list_select_related = ("owner",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
