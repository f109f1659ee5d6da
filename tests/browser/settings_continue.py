"""The test settings with ``ADVISORS["DISCONNECT_POLICY"] = "continue"`` (issue 23)."""

from tests.settings import *  # noqa: F403
from tests.settings import ADVISORS

ADVISORS = {**ADVISORS, "DISCONNECT_POLICY": "continue"}
