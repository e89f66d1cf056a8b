"""OpenTelemetry tracing of a kickoff process, set up once at boot from the standard ``OTEL_*`` variables.

Off unless ``OTEL_TRACES_EXPORTER`` names an exporter (the specification's default is ``otlp``;
kickoff keeps tracing off until asked, so an unset variable costs nothing): ``otlp`` (OTLP over
HTTP/protobuf to ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``),
``console`` (one line of JSON per span on stdout), or any exporter installed under the
``opentelemetry_traces_exporter`` entry point. ``OTEL_SDK_DISABLED=true`` turns it off whatever
else is set. The SDK reads the rest itself: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``
(the resource; unset, the process's own name such as ``kickoff-api``), ``OTEL_TRACES_SAMPLER`` /
``OTEL_TRACES_SAMPLER_ARG``, ``OTEL_BSP_*`` (the batch processor) and ``OTEL_EXPORTER_OTLP_*``.

Spans leave the process from the batch processor's own thread: a collector that is away never
slows a request, a publish or a listener; spans it cannot take are dropped and counted
(``dropped_spans``: the queue was full, an export failed, or the collector was away: after a failed
export, or an OTLP collector that did not take a connection before the first batch or the first
after a failure, the next 30 s of batches are dropped without being encoded or sent). A client span
with no parent (a worker's broker poll, a heartbeat's Redis call) is never recorded: only the hops
of a traced piece of work are. Incoming context is W3C ``traceparent`` /
``tracestate`` only, and a ``traceparent`` that is not a version-00 value of 55 characters, or a
``tracestate`` over 512 characters, is ignored: the work starts a new trace and the value is never
passed on.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import NoOpCounter, NoOpMeter, NoOpMeterProvider
from opentelemetry.propagate import set_global_textmap
from opentelemetry.propagators.textmap import CarrierT, Getter, default_getter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Decision, Sampler, SamplingResult
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from config.errors import ConfigurationError
from config.recorded_span import KickoffTracer
from config.settings import mask_url

logger = logging.getLogger(__name__)

#: OTEL_TRACES_EXPORTER values that leave tracing off.
OFF = frozenset({"", "none"})
#: A traceparent kickoff takes from a caller: version 00, lower-case hex, ids not all zeros (W3C).
_TRACEPARENT = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")
#: W3C: a tracestate longer than this may be dropped; kickoff drops it (the traceparent still counts).
MAX_TRACESTATE_CHARS = 512
#: How long a process's exit waits for its last spans to leave (an unreachable collector: dropped).
EXIT_FLUSH_MILLIS = 2000


def valid_traceparent(value: str | None) -> bool:
    """Whether ``value`` is a traceparent kickoff continues (version 00, 55 characters, ids not zeros)."""
    return bool(value) and _TRACEPARENT.match(value.strip()) is not None  # type: ignore[union-attr]


@dataclass(frozen=True)
class TracingConfig:
    """Where a process's spans go, as the OTEL_* variables say."""

    exporter: str  # "" when off
    protocol: str
    endpoint: str | None  # OTLP only
    service_name: str
    sampler: str
    disabled: bool  # OTEL_SDK_DISABLED
    clients: tuple[str, ...] = ()  # client instrumentations in use (OTEL_PYTHON_DISABLED_INSTRUMENTATIONS)

    @property
    def on(self) -> bool:
        return bool(self.exporter) and not self.disabled

    def describe(self) -> str:
        """One line for ``kickoff check``: where this process's spans would go."""
        if self.disabled:
            return "off (OTEL_SDK_DISABLED=true)"
        if not self.exporter:
            return "off (set OTEL_TRACES_EXPORTER=otlp and OTEL_EXPORTER_OTLP_ENDPOINT to send spans)"
        if self.exporter == "otlp":
            where = f"OTLP {self.protocol} to {mask_url(self.endpoint or '')}"
        elif self.exporter == "console":
            where = "the console exporter (stdout)"
        else:
            where = f"the {self.exporter!r} exporter"
        clients = f"client spans of {', '.join(self.clients)}" if self.clients else "no client spans"
        return f"{where}, service {self.service_name}, sampler {self.sampler}, {clients}"


def _env(environ: Mapping[str, str], name: str) -> str:
    return (environ.get(name) or "").strip()


def read_config(*, service: str, environ: Mapping[str, str] | None = None) -> TracingConfig:
    """The tracing set-up of a process named ``service`` (OTEL_SERVICE_NAME wins) from ``environ``."""
    env = os.environ if environ is None else environ
    exporters = [e.strip().lower() for e in _env(env, "OTEL_TRACES_EXPORTER").split(",") if e.strip()]
    exporters = [e for e in exporters if e not in OFF]
    if len(exporters) > 1:
        raise ConfigurationError(
            f"OTEL_TRACES_EXPORTER: kickoff sends spans to one exporter, got {exporters}"
        )
    protocol = (
        _env(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or _env(env, "OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    endpoint = _env(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None
    if endpoint is None:
        base = _env(env, "OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
        endpoint = base.rstrip("/") + "/v1/traces"
    sampler = _env(env, "OTEL_TRACES_SAMPLER") or "parentbased_always_on"
    if _env(env, "OTEL_TRACES_SAMPLER_ARG"):
        sampler += f" ({_env(env, 'OTEL_TRACES_SAMPLER_ARG')})"
    return TracingConfig(
        exporter=exporters[0] if exporters else "",
        protocol=protocol,
        endpoint=endpoint,
        service_name=_env(env, "OTEL_SERVICE_NAME") or service,
        sampler=sampler,
        disabled=_env(env, "OTEL_SDK_DISABLED").lower() == "true",
        clients=tuple(sorted(CLIENT_INSTRUMENTATIONS - disabled_instrumentations(env))),
    )


def _exporter_of(config: TracingConfig) -> SpanExporter:
    """The span exporter OTEL_TRACES_EXPORTER names; ConfigurationError naming the variable if none."""
    name = config.exporter
    if name == "otlp":
        if config.protocol != "http/protobuf":
            found = list(entry_points(group="opentelemetry_traces_exporter", name="otlp_proto_grpc"))
            if config.protocol == "grpc" and found:
                return found[0].load()()
            raise ConfigurationError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={config.protocol}: kickoff ships the http/protobuf OTLP "
                "exporter (install opentelemetry-exporter-otlp-proto-grpc for grpc)"
            )
        # only the exporter OTEL_TRACES_EXPORTER names is loaded (the OTLP one pulls protobuf in)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415

        return OTLPSpanExporter()  # endpoint, headers, timeout, compression: OTEL_EXPORTER_OTLP_*
    if name == "console":  # one line of JSON per span (the SDK's default spreads one over 40 lines)
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415  as above

        return ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + "\n")
    found = list(entry_points(group="opentelemetry_traces_exporter", name=name))
    if not found:
        known = sorted({"otlp", *(e.name for e in entry_points(group="opentelemetry_traces_exporter"))})
        raise ConfigurationError(
            f"OTEL_TRACES_EXPORTER={name}: no such span exporter (one of {', '.join(known)})"
        )
    return found[0].load()()


def check_config(config: TracingConfig) -> None:
    """Raise ConfigurationError (naming the variable) when ``config``'s exporter cannot be built."""
    if config.on:
        _exporter_of(config).shutdown()


def collector_answers(config: TracingConfig, *, timeout: float = 2.0) -> str | None:
    """None when the OTLP endpoint takes a TCP connection (or the exporter is not OTLP); else why not."""
    if config.exporter != "otlp" or not config.endpoint:
        return None

    parts = urlsplit(config.endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            return None
    except OSError as exc:
        return str(exc) or type(exc).__name__


class _Drops:
    """Spans this process dropped: the batch queue was full, or the exporter failed to send them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {"queue_full": 0, "export_failed": 0, "collector_away": 0}

    def add(self, reason: str, count: int) -> None:
        with self._lock:
            self.counts[reason] = self.counts.get(reason, 0) + count


_drops = _Drops()


class _DropCounter(NoOpCounter):
    """The batch processor's ``otel.sdk.processor.span.processed`` counter: the drops it reports (the
    ones with an ``error.type``) go to ``_drops``; the rest is nothing to kickoff."""

    def add(self, amount: int | float, attributes: Any = None, context: Any = None) -> None:
        reason = (attributes or {}).get("error.type")
        if reason:
            _drops.add(str(reason), int(amount))


class _DropMeter(NoOpMeter):
    def create_counter(self, name: str, unit: str = "", description: str = "") -> NoOpCounter:
        return _DropCounter(name, unit=unit, description=description)


class _DropMeterProvider(NoOpMeterProvider):
    """What the batch processor reports its own counts to (public metrics API): only the drops are kept."""

    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> NoOpMeter:
        return _DropMeter(name)


#: After an export failed, the batches of this many seconds are dropped (and counted) without being
#: encoded or sent; the first batch after it tries the collector again.
COLLECTOR_AWAY_SECONDS = 30.0


class CountingExporter(SpanExporter):
    """An exporter that counts the spans its inner exporter failed to send (``export_failed``).

    Once an export failed (the collector is away: the OTLP exporter already retried it for up to
    its timeout), the batches of the next ``away_seconds`` are dropped at once, counted as
    ``collector_away``: each would cost the process the encoding of every span and a connection
    attempt, and keep the batch queue full, only to fail again (issue 41: an away collector
    measured 3 % of a trigger's CPU in the export thread alone). The first batch after that tries again.

    ``probe`` (OTLP: ``collector_answers``, a TCP connection with a 1 s timeout) is asked before the
    first batch and before the first after a failed export: when the collector does not take a
    connection the batch is dropped at once (``collector_away``) and the next ``away_seconds`` are
    too, instead of the OTLP exporter retrying it for up to its timeout (10 s) while the batch queue
    fills and every span it refuses costs a log record (issue 41).
    """

    def __init__(
        self,
        inner: SpanExporter,
        *,
        away_seconds: float = COLLECTOR_AWAY_SECONDS,
        probe: Callable[[], str | None] | None = None,
    ) -> None:
        self.inner = inner
        self.away_seconds = away_seconds
        self.probe = probe
        self._retry_at = 0.0
        self._doubtful = True  # no export succeeded since the start or the last failure

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if time.monotonic() < self._retry_at:
            _drops.add("collector_away", len(spans))
            return SpanExportResult.FAILURE
        if self._doubtful and self.probe is not None:
            reason = self.probe()
            if reason is not None:
                _drops.add("collector_away", len(spans))
                self._retry_at = time.monotonic() + self.away_seconds
                logger.warning(
                    "span collector away (%s): the spans of the next %gs are dropped",
                    reason,
                    self.away_seconds,
                )
                return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter must not raise; if it does, the spans are gone all the same
            logger.warning("span export raised; %d spans dropped", len(spans), exc_info=True)
            result = SpanExportResult.FAILURE
        self._doubtful = result is not SpanExportResult.SUCCESS
        if self._doubtful:
            _drops.add("export_failed", len(spans))
            self._retry_at = time.monotonic() + self.away_seconds
            logger.warning(
                "span export failed: the spans of the next %gs are dropped without trying the collector",
                self.away_seconds,
            )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _batch_processor(exporter: SpanExporter) -> BatchSpanProcessor:
    """The SDK's batch processor (OTEL_BSP_*), reporting the spans it drops to ``_drops``.

    It reports its counts only with OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED, read as it is built:
    set for that moment, to the meter provider that keeps only the drops.
    """
    name = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"
    before = os.environ.get(name)
    os.environ[name] = "true"
    try:
        return BatchSpanProcessor(exporter, meter_provider=_DropMeterProvider())
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def dropped_spans() -> dict[str, int]:
    """Spans this process dropped so far, by reason: ``queue_full``, ``export_failed``, ``collector_away``."""
    with _drops._lock:
        return dict(_drops.counts)


class NoOrphanClientSpans(Sampler):
    """The configured sampler, except that a client span with no parent is never recorded.

    A worker's broker poll, a heartbeat's Redis call or a reaper's query is no piece of work
    anyone traces; inside a traced piece of work its client calls are recorded as usual.
    """

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner
        # the SDK's default (parentbased_always_on) is decided here from one look at the parent, with
        # the answers ParentBased(ALWAYS_ON) gives: it looks the parent up twice more (issue 41: the
        # sampler was about a tenth of a span's cost)
        self._parent_based_on = inner.get_description() == DEFAULT_ON.get_description()

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        if not parent.is_valid:
            if kind is SpanKind.CLIENT:
                return SamplingResult(Decision.DROP)
            if self._parent_based_on:  # a root: ALWAYS_ON
                return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        elif self._parent_based_on:  # the parent's decision, its trace state kept
            if parent.trace_flags.sampled:
                return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, parent.trace_state)
            return SamplingResult(Decision.DROP, None, parent.trace_state)
        return self.inner.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"NoOrphanClientSpans{{{self.inner.get_description()}}}"


class BoundedTraceContext(TraceContextTextMapPropagator):
    """W3C trace context that takes only a well-formed version-00 ``traceparent`` and a ``tracestate``
    of at most 512 characters (anything else: a new trace, never passed on)."""

    def extract(
        self, carrier: CarrierT, context: Context | None = None, getter: Getter[CarrierT] = default_getter
    ) -> Context:
        parents = getter.get(carrier, self._TRACEPARENT_HEADER_NAME)
        if not parents or len(parents) != 1 or not valid_traceparent(parents[0]):
            return context if context is not None else Context()
        states = getter.get(carrier, self._TRACESTATE_HEADER_NAME)
        if states and sum(len(s) for s in states) + len(states) - 1 > MAX_TRACESTATE_CHARS:
            carrier = {self._TRACEPARENT_HEADER_NAME: parents[0]}  # type: ignore[assignment]
            getter = default_getter  # type: ignore[assignment]
        return super().extract(carrier, context, getter)


class _State:
    """What ``configure_tracing`` set up in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.config: TracingConfig | None = None
        self.provider: TracerProvider | None = None
        self.tracer: KickoffTracer | None = None
        self.on = False
        self.global_set = False
        self.exit_flush = False


_state = _State()


def enabled() -> bool:
    """Whether this process records spans (read on every hot path: one attribute)."""
    return _state.on


def tracer() -> trace.Tracer:
    """kickoff's tracer (only called while ``enabled()``)."""
    assert _state.tracer is not None
    return _state.tracer


def _instrumentors() -> dict[str, Any]:
    """The maintained instrumentations of the client libraries kickoff calls, by their OTel names."""
    # the instrumentations load only in a process that traces
    from opentelemetry.instrumentation.psycopg2 import Psycopg2Instrumentor  # noqa: PLC0415
    from opentelemetry.instrumentation.redis import RedisInstrumentor  # noqa: PLC0415
    from opentelemetry.instrumentation.requests import RequestsInstrumentor  # noqa: PLC0415

    return {
        "psycopg2": Psycopg2Instrumentor(),
        "redis": RedisInstrumentor(),
        "requests": RequestsInstrumentor(),
    }


#: The client instrumentations kickoff can use (their OpenTelemetry names).
CLIENT_INSTRUMENTATIONS = frozenset({"psycopg2", "redis", "requests"})
#: The client instrumentations left out while OTEL_PYTHON_DISABLED_INSTRUMENTATIONS is unset: a span per
#: statement, command or HTTP call costs a trigger more than issue 41's 5 % (docs/tracing.md).
DEFAULT_DISABLED = frozenset({"psycopg2", "redis", "requests"})


def disabled_instrumentations(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """OTEL_PYTHON_DISABLED_INSTRUMENTATIONS: the client instrumentations not to use (psycopg2, redis,
    requests); unset: DEFAULT_DISABLED, ``none``: use them all."""
    env = os.environ if environ is None else environ
    value = _env(env, "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS")
    if not value:
        return DEFAULT_DISABLED
    return frozenset(n.strip().lower() for n in value.split(",") if n.strip())


def _instrument_clients(provider: TracerProvider, disabled: frozenset[str]) -> None:
    for name, instrumentor in _instrumentors().items():
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        if name not in disabled:
            instrumentor.instrument(tracer_provider=provider, skip_dep_check=True)


def configure_tracing(
    *, service: str, environ: Mapping[str, str] | None = None, exporter: SpanExporter | None = None
) -> TracingConfig:
    """Set this process's tracing up from the OTEL_* variables, once (later calls return the first set-up).

    ``exporter`` (tests: the SDK's InMemorySpanExporter) replaces the one the variables name, is
    called as each span ends, and always sets tracing up anew (``disable_tracing`` undoes it).
    Raises ConfigurationError naming a variable kickoff cannot use.
    """
    with _state.lock:
        if _state.config is not None and exporter is None:
            return _state.config
        config = read_config(service=service, environ=environ)
        if exporter is not None:
            config = TracingConfig("in-memory", "", None, config.service_name, config.sampler, False)
        if not config.on:
            _state.config = config
            return config
        processor: SimpleSpanProcessor | BatchSpanProcessor
        if exporter is not None:
            processor = SimpleSpanProcessor(exporter)
        else:
            probe = None
            if config.exporter == "otlp" and config.protocol == "http/protobuf":
                probe = partial(collector_answers, config, timeout=1.0)
            processor = _batch_processor(CountingExporter(_exporter_of(config), probe=probe))
        env_sampler = TracerProvider(
            shutdown_on_exit=False
        ).sampler  # OTEL_TRACES_SAMPLER(_ARG), as the SDK reads it
        given = os.environ if environ is None else environ
        resource = Resource.create({} if _env(given, "OTEL_SERVICE_NAME") else {SERVICE_NAME: service})
        # the provider's processors, given so kickoff's tracer ends its spans into them too (a processor
        # added to the provider later is one of them)
        processors = SynchronousMultiSpanProcessor()
        provider = TracerProvider(
            resource=resource,
            sampler=NoOrphanClientSpans(env_sampler),
            shutdown_on_exit=False,
            active_span_processor=processors,
        )
        provider.add_span_processor(processor)
        if not _state.global_set:  # for code outside kickoff (a job's own spans); settable once
            trace.set_tracer_provider(provider)
            _state.global_set = True
        set_global_textmap(BoundedTraceContext())
        _instrument_clients(provider, disabled_instrumentations(given))
        if exporter is None and not _state.exit_flush:
            atexit.register(_flush_at_exit)
            _state.exit_flush = True
        _state.config, _state.provider, _state.on = config, provider, True
        _state.tracer = KickoffTracer(provider, processors)  # kickoff's own spans (config.recorded_span)
    logger.info("tracing on: %s", config.describe())
    return config


def disable_tracing() -> None:
    """Stop recording spans in this process and take the client instrumentations off (tests)."""
    with _state.lock:
        _state.on = False
        _state.config = None
        for instrumentor in _instrumentors().values():
            if instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.uninstrument()


def _flush_at_exit() -> None:
    """At exit: send what is queued for at most EXIT_FLUSH_MILLIS (an unreachable collector: dropped)."""
    provider = _state.provider
    if provider is None or not _state.on:
        return
    done = threading.Event()

    def flush_now() -> None:
        try:
            provider.force_flush(EXIT_FLUSH_MILLIS)
        finally:
            done.set()

    threading.Thread(target=flush_now, name="kickoff-trace-flush", daemon=True).start()
    done.wait(EXIT_FLUSH_MILLIS / 1000)


def flush(timeout_millis: int = 5000) -> bool:
    """Send every ended span now (tests, a job about to exit); False when tracing is off or it timed out."""
    provider = _state.provider
    return provider.force_flush(timeout_millis) if provider is not None and _state.on else False
