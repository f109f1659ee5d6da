"""The embedded PostgreSQL: started for the suite, pgvector usable through the ORM, reused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pgserver
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from pgvector.django import CosineDistance

from advisors_app import embedded_postgres
from advisorsite import embedded_db
from tests.helpers import subprocess_env
from tests.testapp.models import Item

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_suite_runs_on_embedded_postgresql_with_pgvector() -> None:
    assert connection.vendor == "postgresql"
    # pgserver listens on a unix socket inside its data directory only.
    assert (Path(connection.settings_dict["HOST"]) / ".s.PGSQL.5432").is_socket()
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None


@pytest.mark.django_db
def test_cosine_distance_ordering_through_the_orm() -> None:
    Item.objects.bulk_create(
        [
            Item(name="opposite", embedding=[-1.0, 0.0, 0.0]),
            Item(name="same", embedding=[2.0, 0.0, 0.0]),
            Item(name="orthogonal", embedding=[0.0, 3.0, 0.0]),
        ]
    )
    ranked = Item.objects.annotate(distance=CosineDistance("embedding", [1.0, 0.0, 0.0])).order_by(
        "distance"
    )
    assert [(item.name, round(item.distance, 6)) for item in ranked] == [
        ("same", 0.0),
        ("orthogonal", 1.0),
        ("opposite", 2.0),
    ]


@pytest.mark.slow
def test_start_reuses_the_server_running_on_the_same_data(tmp_path: Path) -> None:
    pgdata = tmp_path / "pgdata"
    # start() gives a URL; database_settings() what a project's settings use, on the same server.
    url_script = "from advisors_app.embedded_postgres import start; print(start(Path(argv[1])))"
    settings_script = (
        "from advisors_app.embedded_postgres import database_settings as s; "
        "print(s(argv[1])['HOST'])"
    )

    def start_in_subprocess(script: str = url_script) -> tuple[str, str]:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from sys import argv; from pathlib import Path; {script}",
                pgdata,
            ],
            cwd=ROOT,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return out, (pgdata / "postmaster.pid").read_text().split()[0]

    try:
        first_url, first_pid = start_in_subprocess()
        # A path given as text works too (before: AttributeError, found by an acceptance pass).
        second_url, second_pid = start_in_subprocess(url_script.replace("Path(argv[1])", "argv[1]"))
        assert (second_url, second_pid) == (first_url, first_pid)
        host, third_pid = start_in_subprocess(settings_script)
        assert third_pid == first_pid and (Path(host) / ".s.PGSQL.5432").is_socket()
        stopped = subprocess.run(
            [sys.executable, "-m", "advisors_app.embedded_postgres", "stop", pgdata],
            cwd=ROOT,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        assert stopped.stdout.strip() == "stopped"
        assert not (pgdata / "postmaster.pid").exists()
        assert not embedded_postgres.stop(pgdata)  # nothing left to stop
    finally:
        # Takes the server over (even after a slow start), to stop and delete it.
        embedded_postgres.start(pgdata, cleanup_mode="delete")
        pgserver.get_server(pgdata, cleanup_mode="delete").cleanup()
    assert not pgdata.exists()


def test_database_url_wins_over_the_embedded_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://someone:secret@db.example:6543/advisors")
    config = embedded_db.database_config()
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["HOST"], config["PORT"], config["NAME"]) == ("db.example", 6543, "advisors")


def test_unknown_embedded_mode_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ADVISORS_EMBEDDED_DB", "ephemeral")
    with pytest.raises(ImproperlyConfigured, match="'ephemeral' is not a mode"):
        embedded_db.database_config()
