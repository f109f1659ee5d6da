"""Choose the version a turn runs: the turn's first stage, before its one read trip.

The caller names a ``label`` or a ``version`` (a number, or ``"draft"``; neither:
``production``) in its :class:`~advisors_app.turn.input.TurnInput`; anything but ``production``
is for staff who may view (or change) chains (:func:`may_try_versions`, else
``permission_denied``, 403) — what the admin asks before it shows a draft or a version: drafts
and other versions are for trying out, not for end users, and every transport (REST, SSE, the
websocket, MCP) comes through here. The ``choose`` stage's hooks
(:mod:`advisors_app.turn.stages`) may then choose another version before the version is read
(:mod:`advisors_app.turn.open`). A conversation whose chain pins versions still continues on the
version it started on, and an experiment of the label assigns the caller one of its arms (the
``assign`` stage): both are decided once the version and the conversation are read.
"""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_permission_codename

from advisors_app.exceptions import TurnError
from advisors_app.models import PRODUCTION, AdvisorChain
from advisors_app.turn import stages
from advisors_app.turn.input import TurnInput
from advisors_app.turn.state import StageTimes, VersionChoice

__all__ = ["TRIES_VERSIONS", "choose_version", "may_try_versions"]

#: An attribute an in-process runner sets on the user object it runs turns as (the evaluation
#: user, :func:`advisors_app.evaluation.runs.eval_user`: inactive, so it holds no permission)
#: when whoever started the run was allowed the version. No transport can set it: each loads
#: its user from the database.
TRIES_VERSIONS = "advisors_tries_versions"


def may_try_versions(user: Any) -> bool:
    """Blocking (a permission lookup): whether ``user`` may run a draft, a version or a label
    other than ``production`` — staff with ``view_advisorchain`` or ``change_advisorchain``."""
    if getattr(user, TRIES_VERSIONS, False) is True:
        return True
    if not getattr(user, "is_staff", False):
        return False
    opts = AdvisorChain._meta
    return any(
        user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")
        for action in ("view", "change")
    )


def choose_version(chain: str, user: Any, data: TurnInput, times: StageTimes) -> VersionChoice:
    """Blocking: the version of ``chain`` the turn of ``data`` runs (see the module
    docstring). Raises :class:`~advisors_app.exceptions.TurnError` ``permission_denied``."""
    started = time.perf_counter()
    label, version = data.label, data.version
    if (version is not None or label not in (None, PRODUCTION)) and not may_try_versions(user):
        raise TurnError(
            "permission_denied",
            "Only staff who may view chains may choose a chain version or label other than "
            "production.",
            http_status=403,
        )
    choice = stages.choose(VersionChoice(chain, user, data.conversation_id, label, version))
    times.add(stages.Stage.CHOOSE, started)
    return choice
