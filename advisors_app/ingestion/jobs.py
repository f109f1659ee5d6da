"""Ingestion jobs: accepted by a request, run by a task worker (Django's tasks API).

:func:`submit_job` stores an :class:`~advisors_app.models.IngestionJob`, its files and a task
in one transaction (the REST upload, the admin upload and ``manage.py ingest --async`` call it
and answer at once); :func:`run_job` is what the task does in a worker (``manage.py db_worker``,
any number of them on any machine, sharing the queue through PostgreSQL): read each file
within the job's limits, in a bounded child process (:mod:`advisors_app.ingestion.parsing`),
split, embed with progress written to the job row after every batch, then store every source at
once (:func:`advisors_app.ingestion.pipeline.ingest_sources`). A file that cannot be read, a
limit passed or a quota exceeded fails the job with a message naming the file and the setting
(every file is read, so ``errors`` name each one that fails, unless the job's CPU time runs
out), and stores nothing; the job's files are deleted when it ends either way. Its runner holds
the job's lock while it runs it (:func:`advisors_app.ingestion.recovery.holding`), so a job
whose worker died is found and queued again (``manage.py ingestion_recover``, and every
``db_worker`` as it starts).

The task is :data:`ingest_job` (``django.tasks`` from Django 6.0, the ``django-tasks``
backport on 5.2), on the ``default`` queue of the ``default`` backend: a project configures
``TASKS`` (the example site: ``django_tasks_db.DatabaseBackend``) and runs workers. Without
``TASKS`` the backport's default backend runs each task at once, in the process that queues it
(then an upload is ingested inside its request)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from advisors_app.core.ingestion import TokenTextSplitter
from advisors_app.ingestion.parsing import CpuBudget, LimitExceeded, Limits, read_upload
from advisors_app.ingestion.pipeline import DEFAULT_BATCH_SIZE, IngestResult, ingest_sources
from advisors_app.ingestion.recovery import holding
from advisors_app.models import Collection, IngestionFile, IngestionJob

try:
    from django.tasks import task  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

__all__ = ["Upload", "ingest_job", "run_job", "submit_job"]

logger = logging.getLogger("advisors_app.ingestion.pipeline")

Status = IngestionJob.Status


@dataclass(frozen=True, slots=True)
class Upload:
    """One file of a job: its source name, bytes and content type; ``as_text``: read as plain
    text whatever the name (a JSON text upload)."""

    name: str
    data: bytes
    content_type: str = ""
    as_text: bool = False


def submit_job(
    collection: Collection,
    uploads: Sequence[Upload],
    *,
    created_by: Any = None,
    owner: Any = None,
    tenant: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    limits: Limits | None = None,
) -> IngestionJob:
    """Store a queued job with its files and enqueue its task, in one transaction.

    ``created_by`` alone may follow it over the API; ``owner`` owns the chunks (``None``:
    shared); ``options``: ``chunk_size``, ``chunk_overlap``, ``batch_size``; ``limits``
    (default: the settings', without quota) are stored with the job and bound the worker.
    Nothing is stored unless the task is enqueued too: a worker never finds a job without
    its task or a task without its job.
    """
    limits = limits or Limits.from_settings()
    user = created_by if getattr(created_by, "is_authenticated", False) else None
    with transaction.atomic():
        job = IngestionJob.objects.create(
            collection=collection,
            created_by=user,
            owner=owner if getattr(owner, "is_authenticated", False) else None,
            tenant=tenant or "",
            metadata=dict(metadata or {}),
            options=dict(options or {}),
            limits=limits.as_dict(),
            sources=[upload.name for upload in uploads],
            bytes=sum(len(upload.data) for upload in uploads),
        )
        IngestionFile.objects.bulk_create(
            IngestionFile(
                job=job,
                position=position,
                name=upload.name,
                content_type=upload.content_type or "",
                as_text=upload.as_text,
                size=len(upload.data),
                data=upload.data,
            )
            for position, upload in enumerate(uploads)
        )
        result = ingest_job.enqueue(str(job.pk))
        IngestionJob.objects.filter(pk=job.pk).update(task_id=str(result.id))
    job.refresh_from_db()
    return job


def _claim(job_id: str) -> IngestionJob | None:
    claimed = IngestionJob.objects.filter(pk=job_id, status=Status.QUEUED).update(
        status=Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:  # deleted, or already run (a task retried by hand)
        return None
    return IngestionJob.objects.select_related("collection", "owner").get(pk=job_id)


def _end(job: IngestionJob, budget: CpuBudget, **changes: Any) -> None:
    IngestionJob.objects.filter(pk=job.pk).update(
        finished_at=timezone.now(), cpu_seconds=round(budget.used(), 3), **changes
    )
    IngestionFile.objects.filter(job=job).delete()


def _fail(job: IngestionJob, budget: CpuBudget, errors: list[dict[str, Any]]) -> dict[str, Any]:
    _end(job, budget, status=Status.FAILED, errors=errors)
    # The worker's log says why too (the job record is not the only place an operator looks).
    logger.warning(
        "Ingestion job %s failed: %s", job.pk, "; ".join(str(e["message"]) for e in errors)
    )
    return {"status": Status.FAILED.value, "errors": errors}


def _read(job: IngestionJob, limits: Limits, budget: CpuBudget) -> Any:
    """The job's sources as ``(name, documents)``, and one error per file that failed."""
    sources: list[tuple[str, list[Any]]] = []
    errors: list[dict[str, Any]] = []
    for file in IngestionFile.objects.filter(job=job).order_by("position").iterator():
        try:
            documents = read_upload(
                bytes(file.data),
                file.name,
                file.content_type,
                as_text=file.as_text,
                limits=limits,
                budget=budget,
            )
        except LimitExceeded as error:
            if error.setting == "INGESTION_CPU_SECONDS":
                raise  # the whole job is out of time: stop reading
            errors.append({"source": file.name, "message": str(error)})
        except ValueError as error:
            errors.append({"source": file.name, "message": str(error)})
        else:
            sources.append((file.name, documents))
    return sources, errors


def run_job(job_id: str) -> dict[str, Any]:
    """Run one queued job to its end (``done`` or ``failed``); what the task returns.

    A job that is not queued (already run, deleted) is left alone. Anything unexpected (or the
    worker being stopped) fails the job with a generic message, is logged, and is raised
    again so the task's result records it. The job's lock is held from before it is claimed
    until it ends: while it is, no recovery takes the job for stranded.
    """
    with holding(job_id):
        return _run(job_id)


def _run(job_id: str) -> dict[str, Any]:
    job = _claim(job_id)
    if job is None:
        return {"status": "skipped"}
    limits = Limits.from_dict(job.limits)
    budget = CpuBudget(limits.cpu_seconds)
    options = job.options
    try:
        sources, errors = _read(job, limits, budget)
        if errors:
            return _fail(job, budget, errors)
        splitter = TokenTextSplitter(
            **{k: options[k] for k in ("chunk_size", "chunk_overlap") if k in options}
        )

        def progress(done: int, total: int) -> None:
            IngestionJob.objects.filter(pk=job.pk).update(done=done, total=total)

        def stored(results: list[IngestResult]) -> None:
            total = sum(r.added for r in results)
            _end(
                job,
                budget,
                status=Status.DONE,
                done=total,
                total=total,
                documents=[_result(r) for r in results],
            )

        results = ingest_sources(
            job.collection,
            sources,
            metadata=job.metadata,
            owner=job.owner,
            tenant=job.tenant or None,
            splitter=splitter,
            batch_size=int(options.get("batch_size", DEFAULT_BATCH_SIZE)),
            progress=progress,
            budget=budget,
            max_chunks=limits.max_chunks,
            on_stored=stored,
        )
    except ValueError as error:  # a limit, a quota, the embedding model's dimensions
        return _fail(job, budget, [{"source": None, "message": str(error)}])
    except BaseException:
        logger.exception("Ingestion job %s failed", job.pk)
        with contextlib.suppress(Exception):  # the database may be what failed
            _fail(job, budget, [{"source": None, "message": "The ingestion stopped unexpectedly."}])
        raise
    return {"status": Status.DONE.value, "documents": [_result(r) for r in results]}


@task()
def ingest_job(job_id: str) -> dict[str, Any]:
    """The task: run the ingestion job ``job_id`` (:func:`run_job`) in a worker."""
    return run_job(job_id)


def _result(result: IngestResult) -> dict[str, Any]:
    return {
        "source": result.source,
        "chunks": result.chunks,
        "added": result.added,
        "unchanged": result.unchanged,
        "removed": result.removed,
    }
