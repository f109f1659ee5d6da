"""The embedded PostgreSQL: started for the suite, pgvector usable through the ORM, reused."""

from __future__ import annotations

import json
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


#: Scripts run in a fresh interpreter (``argv[1]``: the data directory): ``start()`` prints a
#: URL, ``database_settings()`` what a project's settings use, on the same server.
URL_SCRIPT = "from advisors_app.embedded_postgres import start; print(start(Path(argv[1])))"
SETTINGS_SCRIPT = (
    "from advisors_app.embedded_postgres import database_settings as s; print(s(argv[1])['HOST'])"
)


def start_in_subprocess(pgdata: Path, script: str = URL_SCRIPT) -> tuple[str, str]:
    """What ``script`` prints, and the pid of the server then running on ``pgdata``."""
    out = subprocess.run(
        [sys.executable, "-c", f"from sys import argv; from pathlib import Path; {script}", pgdata],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return out, (pgdata / "postmaster.pid").read_text().split()[0]


def delete_server(pgdata: Path) -> None:
    """Take the server on ``pgdata`` over (even after a slow start), stop it and delete it."""
    embedded_postgres.start(pgdata, cleanup_mode="delete")
    pgserver.get_server(pgdata, cleanup_mode="delete").cleanup()
    assert not pgdata.exists()


@pytest.mark.slow
def test_start_reuses_the_server_running_on_the_same_data(tmp_path: Path) -> None:
    pgdata = tmp_path / "pgdata"
    try:
        first_url, first_pid = start_in_subprocess(pgdata)
        # A path given as text works too (before: AttributeError, found by an acceptance pass).
        second_url, second_pid = start_in_subprocess(
            pgdata, URL_SCRIPT.replace("Path(argv[1])", "argv[1]")
        )
        assert (second_url, second_pid) == (first_url, first_pid)
        host, third_pid = start_in_subprocess(pgdata, SETTINGS_SCRIPT)
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
        delete_server(pgdata)


@pytest.mark.slow
def test_start_survives_an_empty_or_corrupt_handle_list(tmp_path: Path) -> None:
    """pgserver keeps the pids of the processes using a server in ``.handle_pids.json``; a
    process killed while writing it left it empty, and every later start failed with a
    ``JSONDecodeError`` until it was deleted by hand (issue 35)."""
    pgdata = tmp_path / "pgdata"
    handles = pgdata / ".handle_pids.json"
    try:
        url, pid = start_in_subprocess(pgdata)
        assert json.loads(handles.read_text()) == []  # the process that started it has exited
        for damage in ("", "[12", "{}", '["x"]'):  # as left by a kill mid-write, and worse
            handles.write_text(damage)
            assert start_in_subprocess(pgdata) == (url, pid), damage  # the same server
            assert json.loads(handles.read_text()) == [], damage  # and the list repaired
        # Damaged while the server is stopped: it starts again on the same data.
        assert embedded_postgres.stop(pgdata)
        handles.write_text("")
        assert start_in_subprocess(pgdata)[0] == url
        assert json.loads(handles.read_text()) == []
    finally:
        delete_server(pgdata)


def test_the_handle_list_is_replaced_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pgserver's list is written to a temporary file renamed over it: a process stopped
    before the rename (here: the rename raises) leaves the old list, never an empty one."""
    handle_list = embedded_postgres._pgserver().postgres_server.DiskList
    handles = handle_list(tmp_path / ".handle_pids.json")
    assert handles.get_and_add(11) == [] and handles.get_and_add(12) == [11]

    def killed(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", killed)
    with pytest.raises(KeyboardInterrupt):
        handles.get_and_add(13)
    monkeypatch.undo()
    assert json.loads(handles.path.read_text()) == [11, 12]
    assert [p.name for p in tmp_path.iterdir()] == [".handle_pids.json"]  # no temporary left
    handles.path.write_text("[11, 1")  # as cut short by a kill mid-write of pgserver's own
    assert handles.get_and_remove(11) == []  # read as empty, and written back valid
    assert json.loads(handles.path.read_text()) == []


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
