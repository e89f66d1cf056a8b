"""Tracing set-up from OTEL_*, the W3C context kickoff takes, spans dropped and counted, logs with trace ids.

In process, with the SDK's in-memory exporter (``traced``); no service is needed.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Decision, ParentBasedTraceIdRatio
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from config import spans, tracing
from config.errors import ConfigurationError
from config.log import KickoffFormatter, LogContextFilter
from publisher.amqp import OutgoingMessage, PublishOutcome, end_publish_spans, publish_spans

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_tracing_is_off_unless_otel_traces_exporter_names_an_exporter():
    assert not tracing.read_config(service="x", environ={}).on
    assert not tracing.read_config(service="x", environ={"OTEL_TRACES_EXPORTER": "none"}).on
    off = tracing.read_config(
        service="x", environ={"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}
    )
    assert not off.on and "OTEL_SDK_DISABLED" in off.describe()
    assert "OTEL_TRACES_EXPORTER" in tracing.read_config(service="x", environ={}).describe()


def test_the_otlp_endpoint_service_and_sampler_come_from_the_standard_variables():
    config = tracing.read_config(
        service="kickoff-api",
        environ={
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
        },
    )
    assert config.on and config.endpoint == "http://collector:4318/v1/traces"
    line = config.describe()
    assert "OTLP http/protobuf to http://collector:4318/v1/traces" in line
    assert "service kickoff-api" in line and "parentbased_traceidratio (0.25)" in line
    named = tracing.read_config(
        service="kickoff-api", environ={"OTEL_SERVICE_NAME": "edge", "OTEL_TRACES_EXPORTER": "console"}
    )
    assert named.service_name == "edge"


def test_client_instrumentations_are_left_out_unless_the_standard_variable_lets_them_in():
    assert tracing.read_config(service="x", environ={}).clients == ()
    every = tracing.read_config(service="x", environ={"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "none"})
    assert every.clients == ("psycopg2", "redis", "requests")
    some = tracing.read_config(service="x", environ={"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "redis"})
    assert some.clients == ("psycopg2", "requests")


@pytest.mark.parametrize(
    "environ, variable",
    [
        ({"OTEL_TRACES_EXPORTER": "jaegerthrift"}, "OTEL_TRACES_EXPORTER=jaegerthrift"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "OTEL_TRACES_EXPORTER"),
    ],
)
def test_a_value_kickoff_cannot_use_is_one_error_naming_the_variable(environ, variable):
    with pytest.raises(ConfigurationError, match=variable):
        tracing.check_config(tracing.read_config(service="x", environ=environ))


@pytest.mark.parametrize(
    "header",
    [
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # no flags
        "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",  # upper case
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",  # another version, longer
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" + "0" * 4000,  # oversized
        "garbage",
    ],
)
def test_a_malformed_or_oversized_traceparent_names_no_context(header):
    assert spans.context_of(header) is None
    assert not tracing.valid_traceparent(header)


def test_a_request_with_a_malformed_traceparent_starts_a_new_trace_and_never_passes_it_on(traced):
    bad = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-" + "x" * 600
    with spans.span("request", parent={"traceparent": bad}) as current:
        header = spans.current_traceparent()
    assert current is not None and header is not None
    assert spans.trace_id_of(header) != "0af7651916cd43dd8448eb211c80319c"
    assert "x" not in header and len(header) == 55


def test_an_oversized_tracestate_is_dropped_and_a_valid_one_is_passed_on(traced):
    with spans.span("ok", parent={"traceparent": CALLER, "tracestate": "vendor=abc"}):
        kept = spans.headers_of()
    with spans.span("big", parent={"traceparent": CALLER, "tracestate": "v=" + "a" * 600}):
        dropped = spans.headers_of()
    assert spans.trace_id_of(kept["traceparent"]) == "0af7651916cd43dd8448eb211c80319c"
    assert kept.get("tracestate") == "vendor=abc"
    assert spans.trace_id_of(dropped["traceparent"]) == "0af7651916cd43dd8448eb211c80319c"
    assert "tracestate" not in dropped


def test_a_message_header_becomes_its_publish_span_and_the_span_continues_the_stored_context(traced):
    stored = {"traceparent": CALLER, "x-other": "kept"}
    messages = [OutgoingMessage(queue="lineup_updates", body={}, message_id="m-1", headers=stored)]
    sent, opened = publish_spans(messages)
    end_publish_spans(opened, [PublishOutcome(sent[0])])
    [span] = traced.get_finished_spans()
    assert span.name == "lineup_updates publish" and span.kind is SpanKind.PRODUCER
    assert format(span.parent.span_id, "016x") == "b7ad6b7169203331"
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert sent[0].headers["traceparent"] == f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-01"
    assert sent[0].headers["x-other"] == "kept" and messages[0].headers["traceparent"] == CALLER


def test_a_message_header_that_names_no_context_is_replaced_not_passed_on(traced):
    junk = OutgoingMessage(
        queue="q", body={}, message_id="m", headers={"traceparent": "junk", "tracestate": "a=b"}
    )
    sent, opened = publish_spans([junk])
    end_publish_spans(opened, [])  # lost: no outcome
    assert sent[0].headers["traceparent"] != "junk" and "tracestate" not in sent[0].headers
    [span] = traced.get_finished_spans()
    assert span.status.status_code.name == "ERROR"


def test_a_context_given_as_parent_is_the_parent_not_read_as_headers(traced):
    with spans.span("outer") as outer:
        context = otel_context.get_current()
    with spans.span("inner", parent=context):
        pass
    inner = next(s for s in traced.get_finished_spans() if s.name == "inner")
    assert outer is not None and inner.parent.span_id == outer.get_span_context().span_id


def test_a_hop_folded_into_the_span_it_runs_in_adds_its_attributes_there_and_makes_no_span(traced):
    with spans.span("POST /v1/trigger/lineup", parent=CALLER) as request:
        within = spans.current_span()
        with spans.span_or_within(within, "lineup_updates trigger", attributes={"kickoff.queue": "q"}) as hop:
            stored = spans.current_traceparent()
    [span] = traced.get_finished_spans()
    assert hop is request is within and span.name == "POST /v1/trigger/lineup"
    assert span.attributes["kickoff.queue"] == "q"
    assert stored == f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-01"


def test_a_hop_with_no_span_to_fold_into_makes_its_own_from_its_parent(traced):
    assert spans.current_span() is None
    with spans.span_or_within(
        None, "lineup_updates trigger", parent=CALLER, attributes={"kickoff.queue": "q"}
    ):
        pass
    [span] = traced.get_finished_spans()
    assert span.name == "lineup_updates trigger" and span.attributes["kickoff.queue"] == "q"
    assert format(span.parent.span_id, "016x") == "b7ad6b7169203331"


def test_an_error_leaving_a_folded_hop_is_recorded_on_the_span_it_ran_in(traced):
    with (
        spans.span("POST /v1/trigger/lineup"),
        pytest.raises(ValueError),
        spans.span_or_within(spans.current_span(), "t"),
    ):
        raise ValueError("bad swap")
    [span] = traced.get_finished_spans()
    assert span.status.status_code.name == "ERROR" and "bad swap" in span.status.description
    assert [e.name for e in span.events] == ["exception"]


def test_a_client_span_without_a_parent_is_not_recorded_but_one_inside_work_is(traced):
    tracer = tracing.tracer()
    tracer.start_span("poll", kind=SpanKind.CLIENT).end()
    with spans.span("work"):
        tracer.start_span("query", kind=SpanKind.CLIENT).end()
    assert sorted(s.name for s in traced.get_finished_spans()) == ["query", "work"]


_PARENTS = {
    "none": None,
    "remote sampled": SpanContext(
        0xA1, 0xB1, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")])
    ),
    "remote not sampled": SpanContext(0xA2, 0xB2, is_remote=True, trace_flags=TraceFlags(0)),
    "local sampled": SpanContext(0xA3, 0xB3, is_remote=False, trace_flags=TraceFlags(1)),
    "local not sampled": SpanContext(
        0xA4, 0xB4, is_remote=False, trace_flags=TraceFlags(0), trace_state=TraceState([("x", "y")])
    ),
}


@pytest.mark.parametrize("parent", sorted(_PARENTS))
@pytest.mark.parametrize("kind", [SpanKind.SERVER, SpanKind.INTERNAL, SpanKind.PRODUCER, SpanKind.CLIENT])
def test_the_default_sampler_decides_as_the_sdks_parent_based_always_on(parent, kind):
    context = None if _PARENTS[parent] is None else set_span_in_context(NonRecordingSpan(_PARENTS[parent]))
    attributes = {"a": 1}
    ours = tracing.NoOrphanClientSpans(DEFAULT_ON).should_sample(context, 0xA0, "n", kind, attributes)
    if parent == "none" and kind is SpanKind.CLIENT:  # kickoff's own rule: an orphan client span
        assert ours.decision is Decision.DROP
        return
    sdks = DEFAULT_ON.should_sample(context, 0xA0, "n", kind, attributes)
    assert (ours.decision, dict(ours.attributes), ours.trace_state) == (
        sdks.decision,
        dict(sdks.attributes),
        sdks.trace_state,
    )


def test_a_sampler_other_than_the_default_is_asked_itself():
    ratio = ParentBasedTraceIdRatio(0.0)
    root = tracing.NoOrphanClientSpans(ratio).should_sample(None, 0xA0, "n", SpanKind.SERVER)
    assert root.decision is Decision.DROP  # the default would have recorded it


def test_a_log_line_written_inside_a_span_carries_its_trace_and_span_ids(traced):
    def line(kind: str) -> str:
        record = logging.LogRecord("kickoff.test", logging.INFO, __file__, 1, "hello %s", ("there",), None)
        LogContextFilter().filter(record)
        return KickoffFormatter(kind).format(record)

    with spans.span("request", parent=CALLER):
        ids = spans.current_ids()
        doc, text = json.loads(line("json")), line("text")
    assert ids is not None and doc["trace_id"] == ids[0] == "0af7651916cd43dd8448eb211c80319c"
    assert doc["span_id"] == ids[1] and doc["message"] == "hello there"
    assert f"(trace={ids[0]}): hello there" in text
    outside = json.loads(line("json"))
    assert "trace_id" not in outside and list(outside) == [
        "time",
        "level",
        "logger",
        "message",
        "pid",
        "thread",
    ]


def test_while_tracing_is_off_every_helper_does_nothing():
    assert not tracing.enabled()
    with spans.span("x", parent=CALLER) as current:
        assert current is None and spans.current_traceparent() is None and spans.current_ids() is None
        assert spans.current_span() is None
    assert spans.headers_of() == {} and spans.link_to(CALLER) == []
    message = OutgoingMessage(queue="q", body={}, message_id="m", headers={"traceparent": CALLER})
    assert publish_spans([message])[0][0].headers == {"traceparent": CALLER}


class _Unreachable:
    """An exporter whose collector never answers in time."""

    def export(self, batch):
        time.sleep(0.2)
        return SpanExportResult.FAILURE

    def shutdown(self):
        return None

    def force_flush(self, timeout_millis=30000):
        return True


def test_an_unreachable_collector_never_slows_the_work_and_its_spans_are_dropped_and_counted(monkeypatch):
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "64")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "16")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
    before = tracing.dropped_spans()
    processor = tracing._batch_processor(tracing.CountingExporter(_Unreachable()))
    exporter = InMemorySpanExporter()
    tracing.configure_tracing(service="kickoff-test", exporter=exporter, environ={})
    try:
        tracing._state.provider.add_span_processor(processor)
        started = time.monotonic()
        for n in range(2000):
            with spans.span(f"work {n}"):
                pass
        elapsed = time.monotonic() - started
    finally:
        tracing.disable_tracing()
        processor.shutdown()
    after = tracing.dropped_spans()
    assert elapsed < 10, "the work waited for the collector"
    assert after["queue_full"] > before["queue_full"]
    assert after["export_failed"] > before["export_failed"]


class _CountedFailures(SpanExporter):
    """An exporter whose collector is away: every export fails; counts the exports it was asked for."""

    def __init__(self) -> None:
        self.exports = 0

    def export(self, batch):
        self.exports += 1
        return SpanExportResult.FAILURE

    def shutdown(self):
        return None


def test_after_a_failed_export_the_next_batches_are_dropped_without_trying_the_collector(monkeypatch):
    inner = _CountedFailures()
    exporter = tracing.CountingExporter(inner, away_seconds=30.0)
    clock = [1000.0]
    monkeypatch.setattr(tracing.time, "monotonic", lambda: clock[0])
    before = tracing.dropped_spans()
    batch = [object()] * 5
    assert exporter.export(batch) is SpanExportResult.FAILURE and inner.exports == 1
    clock[0] += 29.0
    assert exporter.export(batch) is SpanExportResult.FAILURE and inner.exports == 1  # not tried
    clock[0] += 2.0
    exporter.export(batch)
    assert inner.exports == 2  # the window is over: the collector is tried again
    after = tracing.dropped_spans()
    assert after["export_failed"] - before["export_failed"] == 10
    assert after["collector_away"] - before["collector_away"] == 5


def test_a_collector_that_takes_no_connection_drops_the_batch_without_the_exporter_retrying_it(monkeypatch):
    inner = _CountedFailures()
    refused: list[str | None] = ["connection refused"]
    asked: list[int] = []

    def probe() -> str | None:
        asked.append(1)
        return refused[0]

    exporter = tracing.CountingExporter(inner, away_seconds=30.0, probe=probe)
    clock = [1000.0]
    monkeypatch.setattr(tracing.time, "monotonic", lambda: clock[0])
    before = tracing.dropped_spans()
    batch = [object()] * 5
    assert exporter.export(batch) is SpanExportResult.FAILURE and inner.exports == 0 and len(asked) == 1
    clock[0] += 29.0
    assert exporter.export(batch) is SpanExportResult.FAILURE and len(asked) == 1  # inside the window
    clock[0] += 2.0
    refused[0] = None  # the collector takes connections again: the exporter is tried
    inner.export = lambda spans: SpanExportResult.SUCCESS  # type: ignore[method-assign]
    assert exporter.export(batch) is SpanExportResult.SUCCESS and len(asked) == 2
    assert exporter.export(batch) is SpanExportResult.SUCCESS and len(asked) == 2  # not asked once it sent
    after = tracing.dropped_spans()
    assert after["collector_away"] - before["collector_away"] == 10
    assert after["export_failed"] == before["export_failed"]
