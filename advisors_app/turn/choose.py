"""Choose the version a turn runs: the turn's first stage, before its one read trip.

The caller names a ``label`` or a ``version`` (a number, or ``"draft"``; neither:
``production``) in its :class:`~advisors_app.turn.input.TurnInput`; anything but ``production``
is for staff (``permission_denied``, 403): drafts and other versions are for trying out, not for
end users. The ``choose`` stage's hooks (:mod:`advisors_app.turn.stages`) may then choose another
version — an experiment assigning the caller to one of its arms — before the version is read
(:mod:`advisors_app.turn.open`). A conversation whose chain pins versions still continues on the
version it started on: that is decided once the conversation is read.
"""

from __future__ import annotations

import time
from typing import Any

from advisors_app.exceptions import TurnError
from advisors_app.models import PRODUCTION
from advisors_app.turn import stages
from advisors_app.turn.input import TurnInput
from advisors_app.turn.state import StageTimes, VersionChoice

__all__ = ["choose_version"]


def choose_version(chain: str, user: Any, data: TurnInput, times: StageTimes) -> VersionChoice:
    """Blocking: the version of ``chain`` the turn of ``data`` runs (see the module
    docstring). Raises :class:`~advisors_app.exceptions.TurnError` ``permission_denied``."""
    started = time.perf_counter()
    label, version = data.label, data.version
    if (version is not None or label not in (None, PRODUCTION)) and not user.is_staff:
        raise TurnError(
            "permission_denied",
            "Only staff may choose a chain version or label other than production.",
            http_status=403,
        )
    choice = stages.choose(VersionChoice(chain, user, data.conversation_id, label, version))
    times.add(stages.Stage.CHOOSE, started)
    return choice
