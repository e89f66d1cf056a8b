"""One trace from the caller to the consumer and the verification, and from a run request to the job.

Real processes export to an OTLP/HTTP receiver in the test (tests/otlp_receiver.py): `kickoff serve`
(its RabbitMQ away, so a trigger's row waits for the drain), `kickoff outbox drain`, `kickoff actions
verify`, `kickoff launcher` and the job process it starts. The test consumer reads the message from
RabbitMQ and makes its span in this process with the SDK's in-memory exporter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api.keys import Scope, create_key
from config import spans, tracing
from tests.api.conftest import DOWN_AMQP_URL, REPO, Server, serving
from tests.otlp_receiver import ReceivedSpan, Receiver, otlp_receiver
from tests.waiting import wait_for

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
CALLER = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
SERVER, PRODUCER, CONSUMER = 2, 4, 5  # OTLP span kinds


def lineup(key: str) -> dict[str, Any]:
    return {
        "league_id": "L1",
        "team_id": "7",
        "swaps": [{"player_id": 3139477, "to_slot": "BE"}],
        "idempotency_key": key,
    }


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as rx:
        yield rx


@pytest.fixture(scope="module")
def traced_server(
    server_env: dict[str, str], receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """`kickoff serve` exporting to the receiver, JSON logs, its RabbitMQ away (triggers stay pending)."""
    env = {
        **server_env,
        **receiver.env(),
        "AMQP_URL": DOWN_AMQP_URL,
        "AMQP_CONNECT_TIMEOUT_SECONDS": "1",
        "LOG_FORMAT": "json",
    }
    with serving(env, tmp_path_factory.mktemp("api-traced")) as server:
        yield server


def kickoff(env: dict[str, str], *args: str) -> str:
    """Run the kickoff CLI as a process of its own (its spans go to the receiver); its output."""
    done = subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def consumer() -> Iterator[InMemorySpanExporter]:
    """The test consumer's tracing: this process, the SDK's in-memory exporter."""
    exporter = InMemorySpanExporter()
    tracing.configure_tracing(service="test-consumer", exporter=exporter, environ={})
    yield exporter
    tracing.disable_tracing()


def one(spans_: list[ReceivedSpan], what: str) -> ReceivedSpan:
    assert len(spans_) == 1, f"{what}: {spans_}"
    return spans_[0]


def test_a_trigger_with_a_traceparent_is_one_trace_from_the_caller_through_the_drain_to_the_consumer_and_back(
    traced_server, receiver, server_env, fresh_queues, read_queue, db, consumer
):
    _, key = create_key(name="traced", scope=Scope.TRIGGER)
    auth = {"Authorization": f"Bearer {key}"}
    answer = httpx.post(
        f"{traced_server.url}/v1/trigger/lineup",
        json=lineup("traced-1"),
        headers={**auth, "traceparent": CALLER},
    )
    assert answer.status_code == 202 and answer.json()["status"] == "pending", answer.text
    tracking_id = answer.json()["tracking_id"]

    drain_env = {**server_env, **receiver.env()}
    kickoff(drain_env, "outbox", "drain", "--now")
    [(body, properties)] = [m for m in read_queue("lineup_updates") if m[0]["tracking_id"] == tracking_id]
    header = properties.headers["traceparent"]
    assert body["traceparent"] == CALLER  # the body keeps the caller's value; the header names the hop

    # The test consumer: its span continues the message's header, and it reports with its own context.
    with spans.span("lineup_updates process", parent=properties.headers, kind=spans.SpanKind.CONSUMER):
        consumer_context = spans.current_traceparent()
        reported = httpx.post(
            f"{traced_server.url}/v1/actions/{tracking_id}/result",
            json={"outcome": "succeeded", "details": {"team_id": "7"}},
            headers={**auth, "traceparent": consumer_context},
        )
    assert reported.status_code == 202, reported.text
    kickoff(drain_env, "actions", "verify")

    receiver.wait_for_span(
        lambda s: s.name == "action result verify" and s.trace_id == CALLER_TRACE, what="verify"
    )
    trace = receiver.spans(CALLER_TRACE)
    # the trigger route's request span is the trigger's: it carries the action's tracking id
    request = one([s for s in trace if s.name == "POST /v1/trigger/lineup"], "request span")
    assert request.parent_id == CALLER_SPAN and request.kind == SERVER and request.service == "kickoff-api"
    assert request.attributes["kickoff.tracking_id"] == tracking_id
    assert request.attributes["kickoff.queue"] == "lineup_updates"
    assert receiver.named("lineup_updates trigger", CALLER_TRACE) == []
    # the server's own publish (RabbitMQ away) is recorded by the request span, not a span of its own
    assert request.attributes["kickoff.status"] == "pending"
    [(_, failed)] = [e for e in request.events if e[0] == "publish failed"]
    assert failed["error"], request.events
    publishes = receiver.named("lineup_updates publish", CALLER_TRACE)
    drained = one(publishes, "the drain's publish")
    assert drained.service == "kickoff-cli" and drained.status_code != 2
    assert drained.parent_id == request.span_id and drained.kind == PRODUCER
    assert header == f"00-{CALLER_TRACE}-{drained.span_id}-01"  # the consumer's header names the publish span

    [consumed] = consumer.get_finished_spans()
    assert format(consumed.context.trace_id, "032x") == CALLER_TRACE
    assert format(consumed.parent.span_id, "016x") == drained.span_id
    result = one([s for s in trace if s.name == "POST /v1/actions/{tracking_id}/result"], "result report")
    assert result.parent_id == format(consumed.context.span_id, "016x")
    verify = one(receiver.named("action result verify", CALLER_TRACE), "verification")
    assert verify.parent_id == result.span_id and verify.service == "kickoff-cli"

    # A log line written inside the request carries its trace id.
    lines = [json.loads(line) for line in traced_server.log().splitlines() if line.startswith("{")]
    failed_lines = [d for d in lines if f"outbox publish failed: tracking_id={tracking_id}" in d["message"]]
    assert failed_lines, traced_server.log()[-2000:]
    assert failed_lines[0]["trace_id"] == CALLER_TRACE and failed_lines[0]["span_id"] == request.span_id


@pytest.mark.parametrize(
    "headers",
    [
        {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01-" + "f" * 900},
        {"traceparent": "00-" + "z" * 32 + f"-{CALLER_SPAN}-01"},
        {"traceparent": CALLER.upper()},
    ],
    ids=["oversized", "not-hex", "upper-case"],
)
def test_a_malformed_or_oversized_traceparent_starts_a_new_trace_and_never_reaches_a_message_header(
    headers, traced_server, receiver, server_env, fresh_queues, read_queue, db
):
    _, key = create_key(name="bad-trace", scope=Scope.TRIGGER)
    answer = httpx.post(
        f"{traced_server.url}/v1/trigger/lineup",
        json=lineup(f"bad-{len(headers['traceparent'])}-{headers['traceparent'][3]}"),
        headers={"Authorization": f"Bearer {key}", **headers},
    )
    assert answer.status_code == 202, answer.text
    tracking_id = answer.json()["tracking_id"]
    kickoff({**server_env, **receiver.env()}, "outbox", "drain", "--now")
    [(body, properties)] = [m for m in read_queue("lineup_updates") if m[0]["tracking_id"] == tracking_id]
    header = properties.headers["traceparent"]
    assert header != headers["traceparent"] and tracing.valid_traceparent(header)
    assert CALLER_TRACE not in header.lower() and body["traceparent"] is None
    assert "tracestate" not in properties.headers
    request = receiver.wait_for_span(
        lambda s: s.kind == SERVER and s.attributes.get("kickoff.tracking_id") == tracking_id
    )
    assert request.kind == SERVER and request.parent_id == "" and request.trace_id != CALLER_TRACE
    assert spans.trace_id_of(header) == request.trace_id


def test_an_oversized_tracestate_is_dropped_and_the_traceparent_still_continues_the_trace(
    traced_server, receiver, server_env, fresh_queues, read_queue, db
):
    _, key = create_key(name="big-state", scope=Scope.TRIGGER)
    trace_id = "1" * 31 + "2"
    answer = httpx.post(
        f"{traced_server.url}/v1/trigger/lineup",
        json=lineup("big-state"),
        headers={
            "Authorization": f"Bearer {key}",
            "traceparent": f"00-{trace_id}-{CALLER_SPAN}-01",
            "tracestate": "vendor=" + "a" * 600,
        },
    )
    assert answer.status_code == 202, answer.text
    kickoff({**server_env, **receiver.env()}, "outbox", "drain", "--now")
    [(_, properties)] = [
        m for m in read_queue("lineup_updates") if m[0]["tracking_id"] == answer.json()["tracking_id"]
    ]
    assert spans.trace_id_of(properties.headers["traceparent"]) == trace_id
    assert "tracestate" not in properties.headers


def test_a_run_request_is_one_trace_through_the_launcher_into_the_job_process(
    traced_server, receiver, server_env, fresh_queues, db, tmp_path: Path
):
    _, key = create_key(name="runs", scope=Scope.OPERATOR)
    trace_id = "3" * 31 + "4"
    env = {
        **server_env,
        **receiver.env(),
        "LAUNCHER_POLL_SECONDS": "0.1",
        "LAUNCHER_DRAIN_INTERVAL_SECONDS": "0.2",
        "LAUNCHER_RESCAN_INTERVAL_SECONDS": "600",
        "DATA_DIR": str(tmp_path / "data"),
        "RUN_TRACE_DIR": str(tmp_path),
    }
    log_path = tmp_path / "launcher.log"
    log = log_path.open("wb")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "cli", "launcher", "--cap", "2"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: "launcher on" in log_path.read_text(), timeout=60, what="the launcher to start")
        answer = httpx.post(  # the server's RabbitMQ is away: the launcher's own drain publishes the command
            f"{traced_server.url}/v1/runs",
            json={"job": "scoped", "params": {"steps": ["extract"]}},
            headers={"Authorization": f"Bearer {key}", "traceparent": f"00-{trace_id}-{CALLER_SPAN}-01"},
        )
        assert answer.status_code == 202 and answer.json()["status"] == "pending", answer.text
        run_id = answer.json()["run_id"]
        wait_for(lambda: (tmp_path / f"{run_id}.1.json").exists(), timeout=90, what="the job's trace file")
        job = receiver.wait_for_span(
            lambda s: s.name == "scoped job" and s.trace_id == trace_id, what="job span"
        )
        step = receiver.wait_for_span(
            lambda s: s.name == "extract step" and s.trace_id == trace_id, what="step"
        )
        run = receiver.wait_for_span(
            lambda s: s.name == "scoped run" and s.trace_id == trace_id, what="run span"
        )
    finally:
        launcher.terminate()
        launcher.wait(timeout=30)
        log.close()
    written = json.loads((tmp_path / f"{run_id}.1.json").read_text())
    assert spans.trace_id_of(written["traceparent"]) == trace_id  # the job process reads the same trace id
    trace = receiver.spans(trace_id)
    request = one([s for s in trace if s.name == "POST /v1/runs"], "request span")
    publishes = [s for s in trace if s.name == "job_runs publish"]
    publish = one([s for s in publishes if s.service == "kickoff-launcher"], "the launcher's drain publish")
    assert request.parent_id == CALLER_SPAN and publish.parent_id == request.span_id
    assert run.parent_id == publish.span_id and run.attributes["kickoff.run_id"] == run_id
    assert run.service == "kickoff-launcher" and written["traceparent"] == f"00-{trace_id}-{run.span_id}-01"
    assert job.parent_id == run.span_id and job.service == "kickoff-job"
    assert step.parent_id == job.span_id
