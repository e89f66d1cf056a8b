"""kickoff's own spans (config.recorded_span) reach the processors as the SDK's span would: the same
name, kind, parent, attributes, events, links, status, resource and scope, within the same limits.

In process, with the SDK's in-memory exporter; no service is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanKind, Status, StatusCode

from config import spans, tracing
from config.recorded_span import RecordedSpan

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _work(tracer: trace.Tracer) -> None:
    """Every change a span can take, in the order kickoff's code makes them."""
    parent = spans.context_of(CALLER)
    current = tracer.start_span("POST", context=parent, kind=SpanKind.SERVER, attributes={"a": 1})
    other = trace.get_current_span(spans.context_of(CALLER.replace("b7ad", "c7ad"))).get_span_context()
    current.set_attributes({"kickoff.queue": "lineup", "ratio": 0.5, "ok": True})
    current.set_attribute("kickoff.status", "queued")
    current.add_event("publish failed", {"error": "broker away"})
    current.add_link(other, {"kickoff.why": "closed it"})
    try:
        raise ValueError("bad swap")
    except ValueError as exc:
        current.record_exception(exc)
    current.set_status(Status(StatusCode.ERROR, "HTTP 500"))
    current.set_status(StatusCode.UNSET)  # changes nothing
    current.update_name("POST /v1/trigger/lineup")
    current.end()
    current.set_attribute("after", "the end")  # ignored by both: the span ended
    current.end()  # a second end exports nothing more


def _shape(span: ReadableSpan) -> dict[str, Any]:
    """What an exporter reads of ``span``, times and the exception's stack trace left out."""

    def attrs(values: Any) -> dict[str, Any]:
        return {k: v for k, v in dict(values or {}).items() if k != "exception.stacktrace"}

    return {
        "name": span.name,
        "kind": span.kind,
        "trace_id": span.context.trace_id if span.parent else None,  # a root: a new random id
        "parent": (span.parent.trace_id, span.parent.span_id) if span.parent else None,
        "sampled": span.context.trace_flags.sampled,
        "attributes": attrs(span.attributes),
        "events": [(e.name, attrs(e.attributes)) for e in span.events],
        "links": [(link.context.span_id, attrs(link.attributes)) for link in span.links],
        "status": (span.status.status_code, span.status.description),
        "resource": dict(span.resource.attributes),
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
        "timed": span.start_time is not None and span.end_time >= span.start_time,
    }


def _made_by(
    traced: InMemorySpanExporter, make: Callable[[trace.Tracer], None], tracer: trace.Tracer
) -> dict[str, Any]:
    traced.clear()
    make(tracer)
    [span] = traced.get_finished_spans()
    return _shape(span)


def _ok_is_final(tracer: trace.Tracer) -> None:
    current = tracer.start_span("x")
    current.set_status(StatusCode.OK)
    current.set_status(StatusCode.ERROR, "too late")
    current.end()


def _raising_in_with(tracer: trace.Tracer) -> None:
    with pytest.raises(KeyError), tracer.start_span("x"):
        raise KeyError("missing")


def test_a_kickoff_span_reaches_the_exporter_as_the_sdks_own_span_would(traced):
    sdk = tracing._state.provider.get_tracer("kickoff")
    for work in (_ok_is_final, _raising_in_with):
        assert _made_by(traced, work, tracing.tracer()) == _made_by(traced, work, sdk), work.__name__
    ours = _made_by(traced, _work, tracing.tracer())
    assert ours == _made_by(traced, _work, sdk)
    assert ours["status"] == (StatusCode.ERROR, "HTTP 500")
    assert ours["attributes"]["kickoff.status"] == "queued" and "after" not in ours["attributes"]
    assert ours["events"][1][0] == "exception" and ours["events"][1][1]["exception.type"] == "ValueError"


def test_a_kickoff_span_is_a_recorded_span_until_it_ends(traced):
    current = tracing.tracer().start_span("x")
    assert isinstance(current, RecordedSpan) and current.is_recording()
    current.end()
    assert not current.is_recording() and len(traced.get_finished_spans()) == 1


def test_values_are_cleaned_once_as_the_span_ends(traced):
    current = tracing.tracer().start_span("x", attributes={"kept": 3})
    current.set_attributes({"none": None, "list": [1, "two", None], "object": object, "flag": False})
    current.end()
    [span] = traced.get_finished_spans()
    assert dict(span.attributes) == {"kept": 3, "list": (1, "two"), "object": str(object), "flag": False}


def test_the_sdks_limits_from_the_standard_variables_hold(monkeypatch):
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "5")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "1")
    exporter = InMemorySpanExporter()
    tracing.configure_tracing(service="kickoff-test", exporter=exporter, environ={})
    try:
        for tracer in (tracing.tracer(), tracing._state.provider.get_tracer("kickoff")):
            current = tracer.start_span("x")
            current.set_attributes({"first": "1", "second": "long value", "third": "abcdefgh"})
            for n in range(4):
                current.add_event(f"event {n}", {"one": 1, "two": 2})
            current.end()
        ours, sdks = exporter.get_finished_spans()
    finally:
        tracing.disable_tracing()
    assert dict(ours.attributes) == dict(sdks.attributes) == {"second": "long ", "third": "abcde"}
    assert [e.name for e in ours.events] == [e.name for e in sdks.events] == ["event 2", "event 3"]
    assert [len(e.attributes) for e in ours.events] == [1, 1]


def test_a_span_the_sampler_drops_is_not_recorded_and_carries_its_decision(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    exporter = InMemorySpanExporter()
    tracing.configure_tracing(service="kickoff-test", exporter=exporter, environ={})
    try:
        with spans.span("work", parent=CALLER) as current:
            assert isinstance(current, NonRecordingSpan)
            context = current.get_span_context()
            assert context.is_valid and context.trace_id == int(CALLER[3:35], 16)
            assert not context.trace_flags.sampled
            header = spans.current_traceparent()
    finally:
        tracing.disable_tracing()
    assert header is not None and header.endswith("-00") and exporter.get_finished_spans() == ()


@pytest.mark.parametrize("parent", [None, CALLER])
def test_a_span_continues_its_parent_or_starts_a_trace_with_a_random_id(traced, parent):
    with spans.span("work", parent=parent) as current:
        assert current is not None
        context = current.get_span_context()
    [span] = traced.get_finished_spans()
    if parent is None:
        assert span.parent is None and context.trace_flags.random_trace_id
    else:
        assert span.parent.span_id == int(CALLER[36:52], 16) and context.trace_id == int(CALLER[3:35], 16)
    assert context.trace_flags.sampled
