"""Spans and W3C trace context for kickoff's code: each helper costs one flag read while tracing is off.

A hop that continues a trace stored as text (an outbox row's ``traceparent`` header, a run's or a
listener record's ``traceparent`` column) passes it as ``parent``; the text a hop stores is
``traceparent_of`` its own span. Attribute values that are None are left out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from config.recorded_span import PLAIN_TYPES
from config.tracing import BoundedTraceContext, enabled, tracer, valid_traceparent

TRACEPARENT = "traceparent"
#: This thread's last ``headers_of`` answer: (the span context it names, the headers, the span).
_last = threading.local()
TRACESTATE = "tracestate"
_PROPAGATOR = BoundedTraceContext()

__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "Span",
    "SpanKind",
    "context_of",
    "current_ids",
    "current_span",
    "current_traceparent",
    "end_span",
    "event",
    "headers_of",
    "link_to",
    "span",
    "span_or_within",
    "start_span",
    "trace_id_of",
    "traceparent_of",
]


def _attrs(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not attributes:
        return None
    return {k: v if type(v) in PLAIN_TYPES else str(v) for k, v in attributes.items() if v is not None}


def context_of(traceparent: str | None, tracestate: str | None = None) -> Context | None:
    """The context a stored ``traceparent`` (and ``tracestate``) names; None when it is not a valid one."""
    if not traceparent:
        return None
    last = getattr(_last, "headers", None)
    if last is not None and last[1].get(TRACEPARENT) == traceparent and last[1].get(TRACESTATE) == tracestate:
        # the text this thread just made of a live span (a trigger's outbox row, published at once):
        # that span is the parent, without parsing its text back
        return trace.set_span_in_context(last[2])
    if (
        not tracestate
    ):  # the common case, parsed here: what the propagator's extract gives, a third of its cost
        text = traceparent.strip()
        if not valid_traceparent(text):
            return None
        remote = SpanContext(
            trace_id=int(text[3:35], 16),
            span_id=int(text[36:52], 16),
            is_remote=True,
            trace_flags=TraceFlags(int(text[53:55], 16)),
        )
        return trace.set_span_in_context(NonRecordingSpan(remote))
    context = _PROPAGATOR.extract({TRACEPARENT: traceparent, TRACESTATE: tracestate})
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def _parent(parent: str | Mapping[str, Any] | Context | None) -> Context | None:
    if parent is None or isinstance(parent, Context):  # first: a Context is a dict too
        return parent
    if isinstance(parent, str):
        return context_of(parent)
    tp, ts = parent.get(TRACEPARENT), parent.get(TRACESTATE)  # message headers
    return context_of(tp if isinstance(tp, str) else None, ts if isinstance(ts, str) else None)


@contextmanager
def span(
    name: str,
    *,
    parent: str | Mapping[str, Any] | Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    links: list[Link] | None = None,
) -> Iterator[Span | None]:
    """A span around the block, current inside it (None while tracing is off).

    ``parent``: a traceparent text, message headers or a context (when it names no valid context,
    or is None: the current span's). An exception leaving the block is recorded on the span.
    """
    if not enabled():
        yield None
        return
    # start_span and attach by hand: what start_as_current_span does, without its two generator layers
    # (a trigger makes this span on every request; issue 41 counts its CPU)
    current = tracer().start_span(
        name, context=_parent(parent), kind=kind, attributes=_attrs(attributes), links=links
    )
    token = otel_context.attach(trace.set_span_in_context(current))
    try:
        yield current
    except Exception as exc:  # as use_span: Exception, not BaseException (GeneratorExit is no error)
        if current.is_recording():
            current.record_exception(exc)
            current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        otel_context.detach(token)
        current.end()


@contextmanager
def span_or_within(
    within: Span | None,
    name: str,
    *,
    parent: str | Mapping[str, Any] | Context | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span | None]:
    """``span(name, parent=..., attributes=...)``, or, when ``within`` is a span, that span with
    ``attributes`` added: a hop folded into the span it runs in (a trigger route's trigger is its
    request's server span, one span fewer on the API's hottest path). An exception leaving the block
    is recorded on whichever span it is."""
    if within is None or not enabled():
        with span(name, parent=parent, attributes=attributes) as made:
            yield made
        return
    values = _attrs(attributes) if within.is_recording() else None
    if values:
        within.set_attributes(values)
    try:
        yield within
    except Exception as exc:
        if within.is_recording():
            within.record_exception(exc)
            within.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise


def current_span() -> Span | None:
    """The current span while tracing is on and there is one (a route hands its request's on); else None."""
    if not enabled():
        return None
    current = trace.get_current_span()
    return current if current.get_span_context().is_valid else None


def start_span(
    name: str,
    *,
    parent: str | Mapping[str, Any] | Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    links: list[Link] | None = None,
) -> Span | None:
    """A started span that is not made current (None while tracing is off); ``end_span`` ends it."""
    if not enabled():
        return None
    return tracer().start_span(
        name, context=_parent(parent), kind=kind, attributes=_attrs(attributes), links=links
    )


def end_span(current: Span | None, *, error: BaseException | str | None = None, **attributes: Any) -> None:
    """End ``current`` (a no-op for None) with ``attributes``; ``error`` marks it failed."""
    if current is None:
        return
    if not current.is_recording():  # sampled out: nothing it is given is kept
        current.end()
        return
    values = _attrs(attributes)
    if values:
        current.set_attributes(values)
    if error is not None:
        current.set_status(Status(StatusCode.ERROR, str(error)[:500]))
        if isinstance(error, BaseException):
            current.record_exception(error)
    current.end()


def headers_of(current: Span | None = None) -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) naming ``current`` (default: the current span); {} when none."""
    if not enabled():
        return {}
    target = current if current is not None else trace.get_current_span()
    context = target.get_span_context()
    if not context.is_valid:
        return {}
    last = getattr(_last, "headers", None)
    if last is not None and last[0] is context:  # a tick's thousand start messages: one span, one text
        return dict(last[1])
    # the W3C text the propagator's inject writes, formatted here (it costs a trigger two lookups of
    # the current context per span)
    carrier = {TRACEPARENT: f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"}
    if context.trace_state:
        carrier[TRACESTATE] = context.trace_state.to_header()
    _last.headers = (context, carrier, target)
    return dict(carrier)


def traceparent_of(current: Span | None = None) -> str | None:
    """The W3C traceparent naming ``current`` (default: the current span); None when there is none."""
    return headers_of(current).get(TRACEPARENT)


def current_traceparent() -> str | None:
    """The traceparent of the current span, or None (tracing off, or no span)."""
    return traceparent_of(None)


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id (32 hex digits) a stored traceparent names, or None."""
    if not traceparent:
        return None
    parts = traceparent.strip().split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def link_to(traceparent: str | None, **attributes: Any) -> list[Link]:
    """A link to the span a stored traceparent names (an empty list when it names none)."""
    context = context_of(traceparent) if enabled() else None
    if context is None:
        return []
    return [Link(trace.get_current_span(context).get_span_context(), _attrs(attributes))]


def link_runs(traceparents: Iterable[str | None], **attributes: Any) -> None:
    """Link the current span to each span the stored traceparents name (a stop or sweep to the runs it
    closed); nothing while tracing is off."""
    if not enabled():
        return
    current = trace.get_current_span()
    for link in (one for tp in traceparents for one in link_to(tp, **attributes)):
        current.add_link(link.context, link.attributes)


def event(name: str, **attributes: Any) -> None:
    """Add an event to the current span (nothing while tracing is off or outside a span)."""
    if enabled():
        trace.get_current_span().add_event(name, _attrs(attributes) or {})


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) in hex of the current span, for log lines; None without one."""
    if not enabled():
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


@contextmanager
def quiet() -> Iterator[None]:
    """No client spans inside (a listener's feed reads and archive writes: its run span's events say it)."""
    if not enabled():
        yield
        return
    # the instrumentation package loads only in a process that traces
    from opentelemetry.instrumentation.utils import suppress_instrumentation  # noqa: PLC0415

    with suppress_instrumentation():
        yield


def attach(current: Span | None) -> object | None:
    """Make ``current`` the current span of this thread until ``detach`` (None: nothing to do)."""
    if current is None:
        return None
    return otel_context.attach(trace.set_span_in_context(current))


def detach(token: object | None) -> None:
    """Undo ``attach``."""
    if token is not None:
        otel_context.detach(token)  # type: ignore[arg-type]
