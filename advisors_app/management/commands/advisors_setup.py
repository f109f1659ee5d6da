"""``manage.py advisors_setup``: make a database ready to use, safely repeatable.

Runs ``migrate``, then ``load_demo`` when a project provides that command (it must be
idempotent), then makes sure an admin user exists. The admin password is generated once and
kept in ``--admin-password-file``; an existing user is never changed, so a password set in the
admin survives re-runs.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandParser

from advisors_app.security.secret_files import read_or_create_secret


class Command(BaseCommand):
    help = "Migrate, load demo data if available, and ensure an admin user (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--admin-password-file",
            type=Path,
            required=True,
            help="File holding the generated admin password (created with mode 600).",
        )
        parser.add_argument("--username", default="admin", help="Admin username (default: admin).")

    def handle(self, *args: Any, admin_password_file: Path, username: str, **options: Any) -> None:
        verbosity = options["verbosity"]
        call_command("migrate", interactive=False, verbosity=verbosity)
        if "load_demo" in get_commands():
            call_command("load_demo", verbosity=verbosity)

        password = read_or_create_secret(admin_password_file, lambda: secrets.token_urlsafe(12))
        user_model = get_user_model()
        manager = user_model._default_manager
        lookup = {user_model.USERNAME_FIELD: username}
        user = manager.filter(**lookup).first()
        if user is None:
            manager.create_superuser(**lookup, password=password)
            note = "new user"
        elif user.check_password(password):
            note = "unchanged"
        else:
            # Made by createsuperuser, or changed in the admin: the file's password is not it.
            self.stdout.write(
                f"Admin login: username {username} with the password it already has "
                f"(not the one in {admin_password_file}; left as it is)"
            )
            return
        self.stdout.write(
            f"Admin login: username {username}  password {password}  ({note}; "
            f"stored in {admin_password_file})"
        )
