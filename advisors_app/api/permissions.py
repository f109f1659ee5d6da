"""Permission classes of the API (every view sets its own; none relies on project defaults)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound
from rest_framework.permissions import SAFE_METHODS, BasePermission

__all__ = ["IsStaffOrReadOnly", "StaffOnlyElseNotFound"]


#: The Django model permission each write method needs, as the admin asks for it.
_WRITE_PERMISSIONS = {"POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}


class IsStaffOrReadOnly(BasePermission):
    """Authenticated users may read; writes need staff status and the view model's Django
    permission for that write (``add``/``change``/``delete``), exactly as in the admin."""

    message = "Only staff with the model permission may change chains."

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return True
        if not user.is_staff:
            return False
        action = _WRITE_PERMISSIONS.get(request.method)
        model = view.get_queryset().model
        codename = f"{model._meta.app_label}.{action}_{model._meta.model_name}"
        if action is None or not user.has_perm(codename):
            self.message = f"Staff need the permission {codename!r} for this."
            return False
        return True


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
