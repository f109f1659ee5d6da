"""``manage.py advisors_setup``: idempotent, same printed password, user's changes kept.

The demo app is installed, so setup runs ``load_demo``: the ``demo`` fixture puts the demo in
place first (as a previous run leaves it), which keeps that step from embedding the corpus.
"""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from advisors_app.models import AdvisorChain, Collection


def run_setup(password_file: Path) -> str:
    out = io.StringIO()
    call_command("advisors_setup", admin_password_file=password_file, stdout=out, verbosity=0)
    return out.getvalue()


@pytest.mark.django_db
def test_setup_creates_admin_once_and_never_resets_its_password(
    tmp_path: Path, demo: Collection
) -> None:
    password_file = tmp_path / "admin-password"

    first = run_setup(password_file)
    password = password_file.read_text().strip()
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert f"username admin  password {password}  (new user" in first
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff and admin.check_password(password)

    assert f"password {password}  (unchanged" in run_setup(password_file)

    admin.set_password("changed-by-the-user")
    admin.save()
    second = run_setup(password_file)
    assert "username admin with the password it already has" in second
    assert password not in second  # never printed when it does not log in
    assert get_user_model().objects.get(username="admin").check_password("changed-by-the-user")
    assert get_user_model().objects.count() == 1
    assert AdvisorChain.objects.filter(slug__startswith="python-docs").count() == 2
