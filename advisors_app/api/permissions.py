"""Permission classes of the API (every view sets its own; none relies on project defaults).

Writes check Django model permissions the way the admin does (DRF's ``DjangoModelPermissions``
semantics: ``POST`` → ``add``, ``PUT``/``PATCH`` → ``change``, ``DELETE`` → ``delete``), and
what the admin asks on top of the view's model: a chain's advisors are an inline of the chain
page, so writing them needs the ``advisorconfig`` permissions; deleting a chain deletes its
versions, labels and their history, which the admin's delete page asks the permission to delete
as well. The version endpoints (:mod:`advisors_app.api.views.versions`) check the rules of
:func:`~advisors_app.definition.can_publish` and :func:`~advisors_app.definition.can_move_label`
(``promote_production`` for the ``production`` label), shared with the admin. A user's own
conversations, collections and documents need no model permission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_permission_codename
from django.db.models import Model
from rest_framework.exceptions import NotFound
from rest_framework.permissions import SAFE_METHODS, BasePermission

__all__ = [
    "IsStaffOrReadOnly",
    "StaffOnlyElseNotFound",
    "model_permission",
    "sees_chain_configuration",
]


#: The Django model permission each write method needs, as the admin asks for it.
_WRITE_PERMISSIONS = {"POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}

#: What a write that sends a chain's ``advisors`` does to its advisor rows: a new chain adds
#: them; a change replaces them all (the admin's inline would add, change and delete rows).
_ADVISOR_ROW_ACTIONS = {"POST": ("add",), "PUT": ("add", "change", "delete")}
_ADVISOR_ROW_ACTIONS["PATCH"] = _ADVISOR_ROW_ACTIONS["PUT"]


def model_permission(action: str, model: type[Model] | Model) -> str:
    """``"<app_label>.<action>_<model_name>"``: the permission the admin checks for ``action``
    (``add``/``change``/``delete``/``view``) on ``model``."""
    opts = model._meta
    return f"{opts.app_label}.{get_permission_codename(action, opts)}"


def sees_chain_configuration(user: Any) -> bool:
    """Whether ``user`` may read chains as the admin shows them — the draft, versions, labels:
    staff who may view (or change) chains, as the admin asks. Everyone else reads what
    ``production`` serves."""
    from advisors_app.models import AdvisorChain

    return bool(
        getattr(user, "is_staff", False)
        and (
            user.has_perm(model_permission("view", AdvisorChain))
            or user.has_perm(model_permission("change", AdvisorChain))
        )
    )


class IsStaffOrReadOnly(BasePermission):
    """Authenticated users may read; writes need staff status and the Django permissions the
    admin asks for the same change (see the module docstring), each refusal naming them."""

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
        if action is None:
            return False
        model = view.get_queryset().model
        needed = [model_permission(action, model)]
        data = request.data
        # A new chain with no advisors adds none; a change that sends them replaces them all.
        sends_rows = isinstance(data, Mapping) and "advisors" in data
        if sends_rows and (request.method != "POST" or data["advisors"]):
            actions = _ADVISOR_ROW_ACTIONS.get(request.method, ())
            needed += [model_permission(a, _advisor_model()) for a in actions]
        return self._require(user, needed)

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        if request.method != "DELETE" or not isinstance(obj, Model):
            return True
        return self._require(request.user, _cascade_permissions(request, obj))

    def _require(self, user: Any, needed: list[str]) -> bool:
        missing = [p for p in needed if not user.has_perm(p)]
        if missing:
            listed = ", ".join(repr(p) for p in missing)
            self.message = f"Staff need the permission{'s' * (len(missing) > 1)} {listed} for this."
            return False
        return True


def _advisor_model() -> type[Model]:
    from advisors_app.models import AdvisorConfig

    return AdvisorConfig


def _cascade_permissions(request: Any, obj: Model) -> list[str]:
    """The delete permissions the admin's delete page asks for the rows deleting ``obj`` also
    deletes (models registered with the admin site; none when the admin is not installed)."""
    from django.apps import apps

    if not apps.is_installed("django.contrib.admin"):
        return []
    from django.contrib.admin import site
    from django.contrib.admin.utils import NestedObjects
    from django.db import router

    collector = NestedObjects(using=router.db_for_write(type(obj), instance=obj))
    collector.collect([obj])
    needed = []
    http_request = getattr(request, "_request", request)
    for model, rows in collector.model_objs.items():
        admin = site._registry.get(model)
        if model is type(obj) or admin is None or not rows:
            continue
        if not admin.has_delete_permission(http_request, next(iter(rows))):
            needed.append(model_permission("delete", model))
    return sorted(needed)


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
        if request.method in SAFE_METHODS and not sees_chain_configuration(user):
            # Staff read versions as the admin shows them: with the permission to view chains.
            self.message = "Viewing chain versions needs advisors_app.view_advisorchain."
            return False
        return True
