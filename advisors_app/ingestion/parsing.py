"""Reading uploaded files within limits: pages, decompressed bytes, characters and CPU time.

Why: a 109 KB PDF whose 200 pages draw one large content stream costs minutes of CPU to
extract (every page parses the whole stream again), and a small PDF whose stream inflates to
gigabytes makes pypdf raise ``LimitReachedError``. :func:`read_upload` is the one reader of
ingestion; it bounds, per file, the pages of a PDF (``ADVISORS["INGESTION_MAX_PAGES"]``), the
decompressed bytes (``INGESTION_MAX_DECOMPRESSED_BYTES``: every PDF stream as pypdf inflates it,
and each page's content again for every page that draws it) and the characters of text
(``INGESTION_MAX_CHARS``), and, per job, the CPU time (``INGESTION_CPU_SECONDS``, a
:class:`CpuBudget`). Passing a limit raises :class:`LimitExceeded` naming the setting; a file
that is not what it claims raises ``ValueError`` naming the file. Nothing here raises anything
else for bad input.

PDFs are read in a child process (``python -m advisors_app.ingestion.parsing``) whose CPU time and
memory
are capped by the kernel (``RLIMIT_CPU`` at the job's remaining budget, ``RLIMIT_AS``), since
one pypdf call cannot be interrupted from inside: whatever a file does, the child is killed when
it spends the budget, and the process that ingests (a task worker) is unharmed. Text, Markdown
and HTML are read in-process: their cost grows with their size, which the upload limit bounds.
"""

from __future__ import annotations

import io
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

__all__ = [
    "CHILD_MEMORY_BYTES",
    "CpuBudget",
    "LimitExceeded",
    "Limits",
    "check_supported",
    "read_upload",
]

#: Address space of the child process reading a PDF (the interpreter, pypdf and the data).
CHILD_MEMORY_BYTES = 2 * 1024**3

_SETTINGS = {
    "max_pages": "INGESTION_MAX_PAGES",
    "max_decompressed_bytes": "INGESTION_MAX_DECOMPRESSED_BYTES",
    "max_chars": "INGESTION_MAX_CHARS",
    "cpu_seconds": "INGESTION_CPU_SECONDS",
    "max_chunks": "MAX_CHUNKS_PER_COLLECTION",
}


class LimitExceeded(ValueError):
    """Raised when a file or an ingestion job passes one of the limits; ``setting`` names the
    ``ADVISORS`` key that sets it, and the message says which file, what and the limit."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(f"{message} (ADVISORS[{setting!r}])")
        self.setting = setting


@dataclass(frozen=True, slots=True)
class Limits:
    """What one ingestion may use; 0 means no limit.

    ``max_pages``, ``max_decompressed_bytes`` and ``max_chars`` are per file, ``cpu_seconds``
    per job (reading, splitting and embedding every file), ``max_chunks`` the chunks the
    job's owner may hold in the collection afterwards (a quota of REST uploads only).
    """

    max_pages: int = 0
    max_decompressed_bytes: int = 0
    max_chars: int = 0
    cpu_seconds: float = 0.0
    max_chunks: int = 0

    @classmethod
    def from_settings(cls, *, quotas: bool = False) -> Limits:
        """The limits of ``ADVISORS`` now; ``quotas``: with the per-user chunk quota."""
        from advisors_app.conf import app_settings

        values = {name: getattr(app_settings, key) for name, key in _SETTINGS.items()}
        if not quotas:
            values["max_chunks"] = 0
        return cls(**values)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Limits:
        """Limits stored with a job (unknown keys are ignored, missing ones unlimited)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cpu_now() -> float:
    """CPU seconds of this process and of its finished children (the PDF readers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class CpuBudget:
    """The CPU time one job may still use, from its creation on (0 seconds: no limit).

    Counts every thread of this process (the embedding model computes on several) and the
    PDF-reading children. :meth:`check` raises :class:`LimitExceeded` once it is spent.
    """

    __slots__ = ("_start", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self._start = _cpu_now()

    def used(self) -> float:
        return _cpu_now() - self._start

    def remaining(self) -> float | None:
        """Seconds left (at least 0), ``None`` without a limit."""
        return max(0.0, self.seconds - self.used()) if self.seconds > 0 else None

    def check(self, doing: str) -> None:
        if self.seconds > 0 and self.used() > self.seconds:
            raise self.exceeded(doing)

    def exceeded(self, doing: str) -> LimitExceeded:
        return LimitExceeded(
            f"the job used more than {self.seconds:g} s of CPU time {doing}",
            "INGESTION_CPU_SECONDS",
        )


_CONTENT_TYPES = {"text/plain", "text/markdown", "text/html", "application/pdf"}


def _base_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def _is_pdf(name: str, content_type: str | None) -> bool:
    from advisors_app.core.ingestion import SUPPORTED_SUFFIXES

    suffix = Path(name).suffix.lower()
    if suffix in SUPPORTED_SUFFIXES:
        return suffix == ".pdf"
    return _base_type(content_type) == "application/pdf"


def check_supported(name: str, content_type: str | None = None) -> None:
    """Raise ``ValueError`` (the readers' message) unless a reader takes ``name`` or
    ``content_type``: checked when an upload is accepted, before any worker reads it."""
    from advisors_app.core.ingestion import SUPPORTED_SUFFIXES

    if Path(name).suffix.lower() in SUPPORTED_SUFFIXES or _base_type(content_type) in (
        _CONTENT_TYPES
    ):
        return
    raise ValueError(f"cannot read {name!r}: supported types are {', '.join(SUPPORTED_SUFFIXES)}")


def read_upload(
    data: bytes,
    name: str,
    content_type: str | None = None,
    *,
    as_text: bool = False,
    limits: Limits | None = None,
    budget: CpuBudget | None = None,
) -> list[Any]:
    """The core ``Document`` s of one uploaded file, read within ``limits``.

    ``as_text``: plain text whatever the name (a JSON text upload); otherwise the reader is
    chosen as ``advisors_app.core.ingestion.read_document`` chooses it (``.txt``, ``.md``,
    ``.html``, ``.pdf``). ``limits`` default to the settings' (no chunk quota); ``budget``
    (default: a fresh one of ``limits.cpu_seconds``) is shared by the files of one job.
    Raises :class:`LimitExceeded` or ``ValueError`` (unsupported, unreadable, not UTF-8).
    """
    from advisors_app.core.ingestion import read_document, read_text

    limits = limits or Limits.from_settings()
    budget = budget or CpuBudget(limits.cpu_seconds)
    if as_text:
        documents = read_text(data, name)
    elif _is_pdf(name, content_type):
        documents = _read_pdf(data, name, limits, budget)
    else:
        documents = read_document(data, name, content_type)
    chars = sum(len(document.text) for document in documents)
    if limits.max_chars and chars > limits.max_chars:
        raise LimitExceeded(
            f"{name} holds {chars} characters of text, more than {limits.max_chars}",
            "INGESTION_MAX_CHARS",
        )
    budget.check(f"reading {name}")
    return documents


def _read_pdf(data: bytes, name: str, limits: Limits, budget: CpuBudget) -> list[Any]:
    from advisors_app.core.vectorstore import Document

    cpu = budget.remaining()
    if cpu is not None and cpu <= 0:
        raise budget.exceeded(f"before reading {name}")
    request = {**limits.as_dict(), "cpu_seconds": cpu or 0, "name": name}
    try:
        child = subprocess.run(
            [sys.executable, "-m", "advisors_app.ingestion.parsing", json.dumps(request)],
            input=data,
            capture_output=True,
            env=_child_environment(),
            # A child that sleeps instead of computing: the wall clock stops it too.
            timeout=None if cpu is None else 2 * cpu + 30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise budget.exceeded(f"reading {name}") from None
    if child.returncode != 0:
        if child.returncode < 0 or (cpu is not None and budget.remaining() == 0):
            # Killed by the kernel: SIGXCPU, then SIGKILL at the hard limit.
            raise budget.exceeded(f"reading {name}")
        detail = child.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ValueError(f"{name} is not a readable PDF: {detail[0]}")
    answer = json.loads(child.stdout)
    if "limit" in answer:
        raise LimitExceeded(answer["error"], answer["limit"])
    if "error" in answer:
        raise ValueError(answer["error"])
    return [
        Document(text.strip(), {"source": name, "page": number})
        for number, text in answer["pages"]
        if text.strip()
    ]


def _child_environment() -> dict[str, str]:
    # The child imports this package wherever the parent runs from (an uninstalled checkout).
    root = str(Path(__file__).resolve().parent.parent)
    path = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


# -- the child process ---------------------------------------------------------------------------


class _ChildLimit(Exception):
    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


def _pypdf_limits(max_bytes: int) -> dict[str, int]:
    """pypdf's own decompression limits (75 MB by default), lowered to ``max_bytes``."""
    from pypdf import get_configuration

    current = get_configuration()
    keys = (
        "maximum_declared_stream_length",
        "array_based_stream_maximum_output_length",
        "jbig2_maximum_output_length",
        "lzw_maximum_output_length",
        "run_length_maximum_output_length",
        "zlib_maximum_output_length",
        "brotli_maximum_output_length",
        "image_maximum_buffer_size",
        "stream_decoding_work_maximum_length",
    )
    return {key: min(max_bytes, getattr(current, key)) for key in keys if hasattr(current, key)}


def _extract_pages(data: bytes, name: str, limits: Limits) -> list[tuple[int, str]]:
    from pypdf import PdfReader, apply_configuration

    most = limits.max_decompressed_bytes
    overrides = _pypdf_limits(most) if most else {}
    with apply_configuration(**overrides):
        reader = PdfReader(io.BytesIO(data))
        count = len(reader.pages)
        if limits.max_pages and count > limits.max_pages:
            raise _ChildLimit(
                f"{name} has {count} pages, more than {limits.max_pages}", "INGESTION_MAX_PAGES"
            )
        pages: list[tuple[int, str]] = []
        inflated = chars = 0
        for number, page in enumerate(reader.pages, start=1):
            # Each page's content counts again for every page that draws it: extraction
            # parses it once per page, so that is the work this file asks for.
            contents = page.get_contents()
            inflated += len(contents.get_data()) if contents is not None else 0
            if limits.max_decompressed_bytes and inflated > limits.max_decompressed_bytes:
                raise _ChildLimit(
                    f"{name} inflates to more than {limits.max_decompressed_bytes} bytes of page "
                    f"content by page {number} of {count}",
                    "INGESTION_MAX_DECOMPRESSED_BYTES",
                )
            # Extraction leaves NULs where a font maps no character; they are not text.
            text = (page.extract_text() or "").replace("\x00", "")
            chars += len(text)
            if limits.max_chars and chars > limits.max_chars:
                raise _ChildLimit(
                    f"{name} holds more than {limits.max_chars} characters of text by page "
                    f"{number} of {count}",
                    "INGESTION_MAX_CHARS",
                )
            pages.append((number, text))
    return pages


def _child(argument: str) -> dict[str, Any]:
    request = json.loads(argument)
    name = request.pop("name")
    limits = Limits.from_dict(request)
    if limits.cpu_seconds:
        seconds = max(1, math.ceil(limits.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    data = sys.stdin.buffer.read()
    from pypdf.errors import LimitReachedError

    try:
        return {"pages": _extract_pages(data, name, limits)}
    except _ChildLimit as error:
        return {"error": str(error), "limit": error.setting}
    except LimitReachedError as error:
        return {
            "error": f"{name} passes a PDF reading limit: {error}",
            "limit": "INGESTION_MAX_DECOMPRESSED_BYTES",
        }
    except MemoryError:
        return {
            "error": f"{name} needs more than {CHILD_MEMORY_BYTES} bytes of memory to read",
            "limit": "INGESTION_MAX_DECOMPRESSED_BYTES",
        }
    except Exception as error:  # pypdf raises many types for malformed files
        return {"error": f"{name} is not a readable PDF: {error or type(error).__name__}"}


if __name__ == "__main__":
    json.dump(_child(sys.argv[1]), sys.stdout)
