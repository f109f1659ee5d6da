"""Permission classes of the API (every view sets its own; none relies on project defaults)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound
from rest_framework.permissions import SAFE_METHODS, BasePermission

__all__ = ["IsStaffOrReadOnly", "StaffOnlyElseNotFound"]


class IsStaffOrReadOnly(BasePermission):
    """Authenticated users may read; only staff may create, change or delete."""

    message = "Only staff may change chains."

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or bool(user.is_staff)


class StaffOnlyElseNotFound(BasePermission):
    """Staff only; any other signed-in user gets 404, as if the endpoint did not exist.

    For the version endpoints: which versions and labels a chain has, and what they contain,
    is staff business (issue 14), and a 404 does not even say that there is something to see.
    Anonymous requests still get 401/403. Writes check Django model permissions on top.
    """

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if not user.is_staff:
            raise NotFound(f"No API endpoint at {request.path}.")
        return True
