"""The app's background tasks, on Django's tasks API.

Django 6.0 has it as ``django.tasks``; on Django 5.2 the ``django-tasks`` backport provides the
same API. A project configures ``TASKS`` (the example site: ``django_tasks_db.DatabaseBackend``)
and runs workers (``manage.py db_worker``); tasks go to the ``default`` queue of the
``default`` backend. Without ``TASKS`` the backport's default backend runs a task at once, in
the process that enqueues it (then an upload is ingested inside its request).
"""

from __future__ import annotations

from typing import Any

try:
    from django.tasks import task  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Django 5.2
    from django_tasks import task

__all__ = ["ingest_job"]


@task()
def ingest_job(job_id: str) -> dict[str, Any]:
    """Run the ingestion job ``job_id`` (:func:`advisors_app.ingestion_jobs.run_job`)."""
    from advisors_app.ingestion_jobs import run_job

    return run_job(job_id)
