"""Reading uploaded files within limits: pages, decompressed bytes, characters, memory and CPU.

Why: a 109 KB PDF whose 200 pages draw one large content stream costs minutes of CPU to
extract (every page parses the whole stream again), a small PDF whose stream inflates to
gigabytes makes pypdf raise ``LimitReachedError``, and a 10 MB HTML file of nested tags takes
BeautifulSoup to 2.3 GB and 54 s (issue 36). :func:`read_upload` is the one reader of ingestion;
it bounds, per file, the pages of a PDF (``ADVISORS["INGESTION_MAX_PAGES"]``), the decompressed
bytes (``INGESTION_MAX_DECOMPRESSED_BYTES``: every PDF stream as pypdf inflates it, and each
page's content again for every page that draws it), the characters of text
(``INGESTION_MAX_CHARS``) and the memory of the reading (``INGESTION_MEMORY_BYTES``), and, per
job, the CPU time (``INGESTION_CPU_SECONDS``, a :class:`CpuBudget`). Passing a limit raises
:class:`LimitExceeded` naming the file and the setting; a file that is not what it claims raises
``ValueError`` naming the file. Nothing here raises anything else for bad input.

Every file, whatever its format, is read in a child process (``python -m
advisors_app.ingestion.parsing``) that the kernel holds to the limits, since one parser call
(pypdf's, BeautifulSoup's, markdown-it's) cannot be interrupted from inside: ``RLIMIT_CPU`` at the
job's remaining budget, ``RLIMIT_AS`` at the memory limit, and ``RLIMIT_FSIZE`` on the answer it
writes (its text, bounded by the character limit). Whatever a file does, the child fails or is
killed, and the process that ingests (a task worker) is unharmed; on Linux the child also dies
with that process. Starting the child costs about half a second of CPU per file, counted in the
job's budget.
"""

from __future__ import annotations

import io
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
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

#: Address space of the child reading one file (the interpreter, the parser and the data), as
#: ``ADVISORS["INGESTION_MEMORY_BYTES"]`` sets it by default; also the bound of jobs stored
#: before that setting existed.
CHILD_MEMORY_BYTES = 1024**3

_SETTINGS = {
    "max_pages": "INGESTION_MAX_PAGES",
    "max_decompressed_bytes": "INGESTION_MAX_DECOMPRESSED_BYTES",
    "max_chars": "INGESTION_MAX_CHARS",
    "cpu_seconds": "INGESTION_CPU_SECONDS",
    "max_chunks": "MAX_CHUNKS_PER_COLLECTION",
    "memory_bytes": "INGESTION_MEMORY_BYTES",
}

#: Bytes of answer the child may write per character of text (JSON escapes a control
#: character in six; a Markdown heading is in its section's text and metadata), and beyond.
_ANSWER_BYTES_PER_CHAR = 8
_ANSWER_SLACK_BYTES = 64 * 1024


class LimitExceeded(ValueError):
    """Raised when a file or an ingestion job passes one of the limits; ``setting`` names the
    ``ADVISORS`` key that sets it, and the message says which file, what and the limit."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(f"{message} (ADVISORS[{setting!r}])")
        self.setting = setting


@dataclass(frozen=True, slots=True)
class Limits:
    """What one ingestion may use; 0 means no limit.

    ``max_pages``, ``max_decompressed_bytes``, ``max_chars`` and ``memory_bytes`` (the address
    space of the process reading it) are per file, ``cpu_seconds`` per job (reading, splitting
    and embedding every file), ``max_chunks`` the chunks the job's owner may hold in the
    collection afterwards (a quota of REST uploads only). Unlike the others, ``memory_bytes``
    defaults to :data:`CHILD_MEMORY_BYTES`, so a reading is bounded unless it is turned off.
    """

    max_pages: int = 0
    max_decompressed_bytes: int = 0
    max_chars: int = 0
    cpu_seconds: float = 0.0
    max_chunks: int = 0
    memory_bytes: int = CHILD_MEMORY_BYTES

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
        """Limits stored with a job (unknown keys are ignored, missing ones the defaults)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _answer_bytes(limits: Limits) -> int:
    """Most bytes a child may answer with (0: no limit, as ``max_chars``)."""
    if not limits.max_chars:
        return 0
    return limits.max_chars * _ANSWER_BYTES_PER_CHAR + _ANSWER_SLACK_BYTES


def _cpu_now() -> float:
    """CPU seconds of this process and of its finished children (the readers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class CpuBudget:
    """The CPU time one job may still use, from its creation on (0 seconds: no limit).

    Counts every thread of this process (the embedding model computes on several) and the
    reading children. :meth:`check` raises :class:`LimitExceeded` once it is spent.
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
    """The core ``Document`` s of one uploaded file, read in a child process within ``limits``.

    ``as_text``: plain text whatever the name (a JSON text upload); otherwise the reader is
    chosen as ``advisors_app.core.ingestion.read_document`` chooses it (``.txt``, ``.md``,
    ``.html``, ``.pdf``). ``limits`` default to the settings' (no chunk quota); ``budget``
    (default: a fresh one of ``limits.cpu_seconds``) is shared by the files of one job.
    Raises :class:`LimitExceeded` or ``ValueError`` (unsupported, unreadable, not UTF-8).
    """
    from advisors_app.core.vectorstore import Document

    limits = limits or Limits.from_settings()
    budget = budget or CpuBudget(limits.cpu_seconds)
    kind = "text" if as_text else "pdf" if _is_pdf(name, content_type) else "document"
    request = {"name": name, "kind": kind, "content_type": content_type or ""}
    documents = [
        Document(text, {"source": name, **extra})
        for text, extra in _read_in_child(data, request, limits, budget)
    ]
    budget.check(f"reading {name}")
    return documents


def _read_in_child(
    data: bytes, request: dict[str, Any], limits: Limits, budget: CpuBudget
) -> list[tuple[str, dict[str, Any]]]:
    name = request["name"]
    cpu = budget.remaining()
    if cpu is not None and cpu <= 0:
        raise budget.exceeded(f"before reading {name}")
    request = {**request, **limits.as_dict(), "cpu_seconds": cpu or 0, "parent": os.getpid()}
    # Files, not pipes: the answer's size is known before it is read, and nothing deadlocks.
    with tempfile.TemporaryFile() as answer, tempfile.TemporaryFile() as stderr:
        try:
            child = subprocess.run(
                [sys.executable, "-m", "advisors_app.ingestion.parsing", json.dumps(request)],
                input=data,
                stdout=answer,
                stderr=stderr,
                env=_child_environment(),
                # A child that sleeps instead of computing: the wall clock stops it too.
                timeout=None if cpu is None else 2 * cpu + 30,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise budget.exceeded(f"reading {name}") from None
        if child.returncode != 0:
            stderr.seek(-min(4096, os.fstat(stderr.fileno()).st_size), os.SEEK_END)
            said = stderr.read().decode(errors="replace")
            raise _child_failure(child.returncode, said, request, limits, budget, cpu)
        if _answer_bytes(limits) and os.fstat(answer.fileno()).st_size > _answer_bytes(limits):
            raise LimitExceeded(_answer_too_large(name, limits), "INGESTION_MAX_CHARS")
        answer.seek(0)
        reply = json.load(answer)
    if "limit" in reply:
        raise LimitExceeded(reply["error"], reply["limit"])
    if "error" in reply:
        raise ValueError(reply["error"])
    return [(text, extra) for text, extra in reply["documents"]]


def _child_failure(
    returncode: int,
    stderr: str,
    request: dict[str, Any],
    limits: Limits,
    budget: CpuBudget,
    cpu: float | None,
) -> ValueError:
    """What a child that ended without an answer means, from how it ended."""
    name = request["name"]
    spent = cpu is not None and budget.remaining() == 0
    if returncode == -signal.SIGXCPU or spent:  # the kernel's CPU limit
        return budget.exceeded(f"reading {name}")
    # Python raises MemoryError at the address-space limit; C code that cannot allocate may
    # abort or crash instead.
    crashed = returncode in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS)
    if limits.memory_bytes and ("MemoryError" in stderr or crashed):
        return LimitExceeded(_memory_exceeded(name, limits), "INGESTION_MEMORY_BYTES")
    if _answer_bytes(limits) and "File too large" in stderr:  # RLIMIT_FSIZE
        return LimitExceeded(_answer_too_large(name, limits), "INGESTION_MAX_CHARS")
    lines = stderr.strip().splitlines()
    detail = lines[-1] if lines else f"its reader ended with status {returncode}"
    unreadable = "is not a readable PDF" if request["kind"] == "pdf" else "could not be read"
    return ValueError(f"{name} {unreadable}: {detail}")


def _memory_exceeded(name: str, limits: Limits) -> str:
    return f"{name} needs more than {limits.memory_bytes} bytes of memory to read"


def _answer_too_large(name: str, limits: Limits) -> str:
    return f"{name} reads into more than {_answer_bytes(limits)} bytes of text and metadata"


def _child_environment() -> dict[str, str]:
    # The child imports this package wherever the parent runs from (an uninstalled checkout).
    root = str(Path(__file__).resolve().parent.parent)
    path = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    # Reading needs no BLAS threads (numpy comes with the core's imports), whose buffers would
    # take address space under the memory limit, more on a machine with more cores.
    threads = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return {**os.environ, **threads, "PYTHONPATH": os.pathsep.join(path)}


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


Read = list[tuple[str, dict[str, Any]]]


def _read_pdf(data: bytes, name: str, _content_type: str, limits: Limits) -> Read:
    from pypdf import PdfReader, apply_configuration
    from pypdf.errors import LimitReachedError

    most = limits.max_decompressed_bytes
    overrides = _pypdf_limits(most) if most else {}
    try:
        with apply_configuration(**overrides):
            reader = PdfReader(io.BytesIO(data))
            count = len(reader.pages)
            if limits.max_pages and count > limits.max_pages:
                raise _ChildLimit(
                    f"{name} has {count} pages, more than {limits.max_pages}",
                    "INGESTION_MAX_PAGES",
                )
            pages: Read = []
            inflated = chars = 0
            for number, page in enumerate(reader.pages, start=1):
                # Each page's content counts again for every page that draws it: extraction
                # parses it once per page, so that is the work this file asks for.
                contents = page.get_contents()
                inflated += len(contents.get_data()) if contents is not None else 0
                if most and inflated > most:
                    raise _ChildLimit(
                        f"{name} inflates to more than {most} bytes of page content by page "
                        f"{number} of {count}",
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
                if text.strip():
                    pages.append((text.strip(), {"page": number}))
    except LimitReachedError as error:
        raise _ChildLimit(
            f"{name} passes a PDF reading limit: {error}", "INGESTION_MAX_DECOMPRESSED_BYTES"
        ) from error
    except (_ChildLimit, MemoryError):
        raise
    except Exception as error:  # pypdf raises many types for malformed files
        detail = error or type(error).__name__
        raise ValueError(f"{name} is not a readable PDF: {detail}") from error
    return pages


def _read_document(data: bytes, name: str, content_type: str, limits: Limits) -> Read:
    from advisors_app.core.ingestion import read_document

    return _checked(read_document(data, name, content_type or None), name, limits)


def _read_text(data: bytes, name: str, _content_type: str, limits: Limits) -> Read:
    from advisors_app.core.ingestion import read_text

    return _checked(read_text(data, name), name, limits)


def _checked(documents: list[Any], name: str, limits: Limits) -> Read:
    chars = sum(len(document.text) for document in documents)
    if limits.max_chars and chars > limits.max_chars:
        raise _ChildLimit(
            f"{name} holds {chars} characters of text, more than {limits.max_chars}",
            "INGESTION_MAX_CHARS",
        )
    return [
        (document.text, {k: v for k, v in document.metadata.items() if k != "source"})
        for document in documents
    ]


_READERS: dict[str, Callable[[bytes, str, str, Limits], Read]] = {
    "pdf": _read_pdf,
    "document": _read_document,
    "text": _read_text,
}


def _die_with_parent(parent: int) -> None:
    """Linux: have the kernel kill this child when the process that started it dies (a worker
    killed outright), instead of leaving it to spend the rest of its budget."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def _hold_to(limits: Limits) -> None:
    """Have the kernel hold this process to ``limits``: CPU time (``SIGXCPU`` at the soft
    limit), address space (``MemoryError``) and the size of the answer it writes."""
    if limits.cpu_seconds:
        seconds = max(1, math.ceil(limits.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    if limits.memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if _answer_bytes(limits):
        resource.setrlimit(resource.RLIMIT_FSIZE, (_answer_bytes(limits), _answer_bytes(limits)))


def _child(request: dict[str, Any], limits: Limits) -> dict[str, Any]:
    name = request["name"]
    try:
        data = sys.stdin.buffer.read()
        read = _READERS[request["kind"]]
        return {"documents": read(data, name, request["content_type"], limits)}
    except _ChildLimit as error:
        return {"error": str(error), "limit": error.setting}
    except MemoryError:
        return {"error": _memory_exceeded(name, limits), "limit": "INGESTION_MEMORY_BYTES"}
    except ValueError as error:  # the readers' messages name the file
        return {"error": str(error)}
    except Exception as error:  # a parser's own failure on a malformed file
        return {"error": f"{name} could not be read: {error or type(error).__name__}"}


def _main(argument: str) -> None:
    """The child: read one file (its bytes on stdin) as ``argument`` (JSON) says, write the
    answer (JSON) to stdout, and exit at once (the interpreter's teardown is no use here)."""
    request = json.loads(argument)
    _die_with_parent(request["parent"])
    limits = Limits.from_dict(request)
    _hold_to(limits)
    answer = json.dumps(_child(request, limits), ensure_ascii=False).encode()
    most = _answer_bytes(limits)
    if most and len(answer) > most:
        too_large = _answer_too_large(request["name"], limits)
        answer = json.dumps({"error": too_large, "limit": "INGESTION_MAX_CHARS"}).encode()
    sys.stdout.buffer.write(answer)
    sys.stdout.buffer.flush()
    os._exit(0)


if __name__ == "__main__":
    _main(sys.argv[1])
