"""Permission classes of the API (every view sets its own; none relies on project defaults)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

__all__ = ["IsStaffOrReadOnly"]


class IsStaffOrReadOnly(BasePermission):
    """Authenticated users may read; only staff may create, change or delete."""

    message = "Only staff may change chains."

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or bool(user.is_staff)
