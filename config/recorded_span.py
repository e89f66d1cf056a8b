"""kickoff's tracer: a recorded span kept as plain values while it runs, handed to the span processor
as the SDK's ``ReadableSpan`` once, as it ends.

The SDK's own span is mutable under a lock: every attribute set on it is cleaned and stored through
``BoundedAttributes`` (a lock, a type check per value, the limits), and its end copies it into a
``ReadableSpan``. With it, tracing took 237 of an HTTP trigger's 3,898 Python and C calls (issue
41: tracing's goal is 5 % of the trigger), about 80 of them in that attribute path; recorded here,
151. Here a span's attributes go into a dict, cleaned once as the span ends, and its
``ReadableSpan`` is built once, with the same limits: the count of
attributes, events and links (``OTEL_SPAN_*_COUNT_LIMIT``, ``OTEL_ATTRIBUTE_*``), string values cut
at ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``.

What stays the SDK's: the sampler (``OTEL_TRACES_SAMPLER``: consulted as each span starts, as the
SDK's tracer does), the id generator, the resource, the processors and exporters, and every span
made outside kickoff's helpers (the client instrumentations, a job's own spans), which the
provider's SDK tracer makes as before. A span sampled out is the API's ``NonRecordingSpan``, as the
SDK's tracer makes it.
"""

from __future__ import annotations

import threading
import traceback
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from time import time_ns
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types

#: Status of a span nothing marked.
UNSET = Status(StatusCode.UNSET)
#: The exception event's attributes (OpenTelemetry's semantic conventions, as the SDK writes them).
EXCEPTION_TYPE, EXCEPTION_MESSAGE = "exception.type", "exception.message"
EXCEPTION_STACKTRACE, EXCEPTION_ESCAPED = "exception.stacktrace", "exception.escaped"


#: Attribute value types kept as they are (None is left out; a list or tuple becomes a tuple of these;
#: anything else becomes its text).
PLAIN_TYPES = frozenset({bool, int, float, str})


def _plain(value: Any) -> Any:
    if type(value) in PLAIN_TYPES:
        return value
    if isinstance(value, (list, tuple)):
        return tuple(v if type(v) in PLAIN_TYPES else str(v) for v in value if v is not None)
    return str(value)


def _bounded(attributes: types.Attributes, count: int | None, length: int | None) -> dict[str, Any]:
    """``attributes`` cleaned once, as they are recorded, and within the limits: None left out, each
    value plain (``PLAIN_TYPES``), a string cut at ``length``, the last ``count`` of them kept (as the
    SDK keeps the latest; kickoff's spans never come near the default 128)."""
    kept: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if value is None:
            continue
        kind = type(value)
        if kind is str:
            kept[key] = value if length is None or len(value) <= length else value[:length]
        elif kind in PLAIN_TYPES:
            kept[key] = value
        else:
            value = _plain(value)
            kept[key] = value if length is None or type(value) is not str else value[:length]
    if count is not None and len(kept) > count:
        kept = dict(list(kept.items())[len(kept) - count :])
    return kept


class RecordedSpan(trace.Span):
    """A sampled span whose name, attributes, events, links and status are plain values until it ends.

    Made by ``KickoffTracer.start_span``; thread-safe where the API asks (a lock around each change,
    as the SDK's span); ``end`` hands one ``ReadableSpan`` to the processor, once.
    """

    def __init__(
        self,
        tracer: KickoffTracer,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: types.Attributes,
        links: Sequence[Link],
        start_time: int | None,
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._attributes: dict[str, Any] = dict(attributes) if attributes else {}
        limits = tracer.limits
        # over a count limit the oldest go, as they go from the SDK's bounded lists (a listener run's
        # span lives for a game)
        self._events: deque[Event] = deque(maxlen=limits.max_events)
        self._links: deque[Link] = deque(links, maxlen=limits.max_links)
        self._status = UNSET
        self._start_time = start_time if start_time is not None else time_ns()
        self._end_time: int | None = None
        self._lock = threading.Lock()

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        with self._lock:
            if self._end_time is None:
                self._attributes.update(attributes)

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        with self._lock:
            if self._end_time is None:
                self._attributes[key] = value

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        limits = self._tracer.limits
        event = Event(
            name,
            _bounded(attributes, limits.max_event_attributes, limits.max_attribute_length),
            timestamp if timestamp is not None else time_ns(),
        )
        with self._lock:
            if self._end_time is None:
                self._events.append(event)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if not context.is_valid:
            return
        limits = self._tracer.limits
        link = Link(context, _bounded(attributes, limits.max_link_attributes, limits.max_attribute_length))
        with self._lock:
            if self._end_time is None:
                self._links.append(link)

    def update_name(self, name: str) -> None:
        with self._lock:
            if self._end_time is None:
                self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """As the SDK's span: OK is final, UNSET changes nothing."""
        given = status if isinstance(status, Status) else Status(status, description)
        with self._lock:
            if self._end_time is not None or self._status.status_code is StatusCode.OK:
                return
            if given.status_code is not StatusCode.UNSET:
                self._status = given

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """An ``exception`` event, its attributes those the SDK's span writes."""
        module, qualname = type(exception).__module__, type(exception).__qualname__
        values: dict[str, Any] = {
            EXCEPTION_TYPE: f"{module}.{qualname}" if module and module != "builtins" else qualname,
            EXCEPTION_MESSAGE: str(exception),
            EXCEPTION_STACKTRACE: "".join(traceback.format_exception(exception)),
            EXCEPTION_ESCAPED: str(escaped),
        }
        if attributes:
            values.update(attributes)
        self.add_event("exception", values, timestamp)

    def __exit__(self, exc_type: Any, exc_val: BaseException | None, exc_tb: Any) -> None:
        """As the SDK's span used as a context manager: an exception is recorded and fails the span."""
        if exc_val is not None and self.is_recording():
            self.record_exception(exc_val, escaped=True)
            self.set_status(Status(StatusCode.ERROR, f"{type(exc_val).__name__}: {exc_val}"))
        super().__exit__(exc_type, exc_val, exc_tb)

    def end(self, end_time: int | None = None) -> None:
        with self._lock:
            if self._end_time is not None:
                return
            self._end_time = end_time if end_time is not None else time_ns()
        tracer, limits = self._tracer, self._tracer.limits
        tracer.processor.on_end(
            ReadableSpan(
                name=self._name,
                context=self._context,
                parent=self._parent,
                resource=tracer.resource,
                attributes=_bounded(
                    self._attributes, limits.max_span_attributes, limits.max_span_attribute_length
                ),
                events=tuple(self._events),
                links=tuple(self._links),
                kind=self._kind,
                status=self._status,
                start_time=self._start_time,
                end_time=self._end_time,
                instrumentation_scope=tracer.scope,
            )
        )


class KickoffTracer(trace.Tracer):
    """The tracer of kickoff's own spans (``config.spans``): ``RecordedSpan``s, decided by the
    provider's sampler, their ids from its id generator, ended into ``processor``."""

    def __init__(self, provider: TracerProvider, processor: SpanProcessor, *, name: str = "kickoff") -> None:
        self.provider = provider
        self.processor = processor
        self.resource = provider.resource
        self.scope = InstrumentationScope(name)
        self.limits = SpanLimits()  # OTEL_SPAN_* / OTEL_ATTRIBUTE_* as the SDK reads them

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        """As the SDK's tracer: the parent from ``context`` (else the current span), the sampler's
        decision, a ``RecordedSpan`` when it records, else a ``NonRecordingSpan`` carrying the ids.
        (``record_exception`` / ``set_status_on_exception``: the API's signature; a ``RecordedSpan``
        used as a context manager always does both, the SDK's defaults, and kickoff's helpers record
        errors themselves.)"""
        links = links or ()
        parent = trace.get_current_span(context).get_span_context()
        ids = self.provider.id_generator
        if parent.is_valid:
            trace_id, random_id = parent.trace_id, parent.trace_flags.random_trace_id
        else:
            parent, trace_id, random_id = None, ids.generate_trace_id(), ids.is_trace_id_random()
        decision = self.provider.sampler.should_sample(context, trace_id, name, kind, attributes, links)
        flags = TraceFlags.SAMPLED if decision.decision.is_sampled() else TraceFlags.DEFAULT
        if random_id:
            flags |= TraceFlags.RANDOM_TRACE_ID
        span_context = SpanContext(
            trace_id,
            ids.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(flags),
            trace_state=decision.trace_state,
        )
        if not decision.decision.is_recording():
            return NonRecordingSpan(span_context)
        span = RecordedSpan(self, name, span_context, parent, kind, decision.attributes, links, start_time)
        self.processor.on_start(span, parent_context=context)
        return span

    @contextmanager
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time)
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current
