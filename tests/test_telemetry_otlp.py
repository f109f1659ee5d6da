"""OpenTelemetry export over the wire: a real OTLP/HTTP receiver on loopback (``POST
/v1/traces``, protobuf, decoded with ``opentelemetry-proto``) gets a turn's spans from the
exporter the setting configures — as a dict, and as ``True`` with the ``OTEL_*`` variables."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from advisors_app.definition.runtime import clear_cache
from advisors_app.integration import call_chain
from advisors_app.models import CallLog
from advisors_app.telemetry import export
from advisors_app.turn import stages
from tests.factories import make_chain, scripted_model
from tests.helpers import database_url_for_subprocess

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent


class _Receiver(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.received.append((self.path, headers, request))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    received: list[tuple[str, dict[str, str], ExportTraceServiceRequest]]


@pytest.fixture
def receiver() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Receiver)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def connected() -> Iterator[None]:
    clear_cache()
    stages.add_hook(stages.Stage.AFTER_COMMIT, export.export_turn)
    yield
    stages.remove_hook(stages.Stage.AFTER_COMMIT, export.export_turn)
    export.shutdown()
    clear_cache()


def _turn(django_user_model: Any) -> CallLog:
    user = django_user_model.objects.create_user("alice", password="pw")
    make_chain("helper", model=scripted_model("helper-model", responses=["Hello!"]))
    call_chain("helper", user, "Hi there")
    provider = export.provider()
    assert provider is not None and provider.force_flush(10_000)
    return CallLog.objects.get()


def _spans(server: _Server) -> tuple[dict[str, str], list[Any], str]:
    assert server.received, "the receiver got nothing"
    spans, service = [], ""
    for path, _, request in server.received:
        assert path == "/v1/traces"
        for resource in request.resource_spans:
            for attr in resource.resource.attributes:
                if attr.key == "service.name":
                    service = attr.value.string_value
            for scope in resource.scope_spans:
                assert scope.scope.name == "advisors_app"
                spans.extend(scope.spans)
    return server.received[0][1], spans, service


def _attributes(span: Any) -> dict[str, Any]:
    values = {}
    for attr in span.attributes:
        kind = attr.value.WhichOneof("value")
        values[attr.key] = getattr(attr.value, kind)
    return values


def test_one_turn_arrives_at_an_otlp_http_receiver(
    receiver: _Server, connected: None, django_user_model: Any
) -> None:
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    setting = {
        "endpoint": endpoint,
        "service_name": "advisors-test",
        "headers": {"x-tenant": "team-a"},
        "timeout": 5,
    }
    with override_settings(ADVISORS={"OPENTELEMETRY": setting}):
        assert export.connect()
    log = _turn(django_user_model)

    headers, spans, service = _spans(receiver)
    assert headers["content-type"] == "application/x-protobuf"
    assert headers["x-tenant"] == "team-a"
    assert service == "advisors-test"
    by_name = {span.name: span for span in spans}
    root = by_name["invoke_agent helper"]
    assert not root.parent_span_id
    assert {span.trace_id for span in spans} == {root.trace_id}
    root_attrs = _attributes(root)
    assert root_attrs["advisors_app.trace_id"] == log.trace_id
    assert root_attrs["advisors_app.chain.version"] == 1
    chat = _attributes(by_name["chat helper-model"])
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "helper-model"
    assert chat["gen_ai.usage.output_tokens"] >= 1
    assert all(span.end_time_unix_nano >= span.start_time_unix_nano > 0 for span in spans)
    assert len(spans) == 2 + len(log.trace["entries"])  # the turn, the model call, advisors


def test_true_reads_the_otel_environment_variables(
    receiver: _Server, connected: None, django_user_model: Any, monkeypatch: Any
) -> None:
    port = receiver.server_address[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}/v1/traces")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    with override_settings(ADVISORS={"OPENTELEMETRY": True}):
        assert export.connect()
    _turn(django_user_model)

    _, spans, service = _spans(receiver)
    assert service == "from-env"
    assert "invoke_agent helper" in {span.name for span in spans}


def test_an_invalid_setting_connects_nothing() -> None:
    with override_settings(ADVISORS={"OPENTELEMETRY": {"endpoint": "nowhere"}}):
        assert not export.connect()
    assert export.provider() is None


_STARTUP = """
import django
django.setup()
from django.core import checks
from advisors_app.telemetry import export
from advisors_app.turn import stages
hooked = export.export_turn in stages.hooks(stages.Stage.AFTER_COMMIT)
ids = [m.id for m in checks.run_checks() if m.id == "advisors_app.E015"]
print(hooked, export.provider() is not None, ids)
"""


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"endpoint": "http://127.0.0.1:9"}, "True True []"),
        ({"endpoint": "nowhere"}, "False False ['advisors_app.E015']"),
        (False, "False False []"),
    ],
)
def test_the_app_connects_the_export_only_when_the_setting_is_on_and_valid(
    tmp_path: Any, setting: Any, expected: str
) -> None:
    """A process starting with the setting: the hook and the provider, or (off, or invalid:
    the check says so) neither."""
    (tmp_path / "otel_settings.py").write_text(
        f"from tests.settings import *\nADVISORS = {{**ADVISORS, 'OPENTELEMETRY': {setting!r}}}\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "otel_settings",
        "DATABASE_URL": database_url_for_subprocess(),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", _STARTUP], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == expected
