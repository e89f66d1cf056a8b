"""Prometheus metrics of the API: request latency here, shared state read at scrape time.

Gauges describing the deployment (listeners by badge, heartbeat age, starts and failures,
gaps, events backfilled and unrecovered, failed archive verifications, exhausted matches,
outbox backlog and dead rows, runs by status, launcher slots in use, trade claims by status, the
age of the scheduler's newest tick, readiness per service) are read from PostgreSQL and Redis
(and the readiness probes) by a custom collector when /metrics is scraped, so any one API
process reports the whole deployment. A source that does not answer is reported as
``kickoff_metrics_source_up{source=...} 0`` and its metrics are left out.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from config.clock import utcnow
from config.errors import KickoffError
from config.set_aside import set_aside_counter
from lifecycle.archive_verify import verification_failures
from lifecycle.board import BoardCache, listener_board
from lifecycle.takeover import BUCKETS, TakeoverPath
from listener.exit_codes import SUCCESS_CODES
from models.badges import Badge
from models.db import release_connection
from models.execution_log import ExecutionStatus
from models.listener_record import gap_totals, start_and_failure_counts, takeover_histogram
from models.match import failed_verification_count
from models.run_log import RunStatus, run_counts_by_status
from publisher.outbox import outbox_report
from publisher.results import set_aside_results
from publisher.trades import trade_claim_counts
from runs.publish import dead_outbox_count

if TYPE_CHECKING:
    from api.context import ApiContext

logger = logging.getLogger(__name__)

TIMED_PREFIXES = ("/v1/trigger/", "/v1/trade/")
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ApiMetrics:
    """The registry of one API process: its own histograms plus the shared-state collector."""

    def __init__(self, ctx: ApiContext) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.trigger_latency = Histogram(
            "kickoff_trigger_request_seconds",
            "Time to answer a trigger or trade request, by route and HTTP status.",
            ["route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.dispatch_tick = Histogram(
            "kickoff_dispatch_tick_seconds",
            "Duration of listener dispatch ticks run by this API process (POST /v1/listeners/dispatch);"
            " worker ticks: dramatiq_message_duration_milliseconds on the workers.",
            registry=self.registry,
        )
        self.shared_state_reads = PromCounter(
            "kickoff_metrics_shared_state_reads",
            "Readings of the deployment's state for /metrics by this process (at most one per"
            " METRICS_CACHE_SECONDS; scrapes in between get the figures read last).",
            registry=self.registry,
        )
        self.readiness_probes = PromCounter(
            "kickoff_readiness_probes",
            "Rounds of service probes made in this process for /readyz and /metrics (answers are kept 2 s).",
            registry=self.registry,
        )
        self.board_reads = PromCounter(
            "kickoff_console_board_reads",
            "Readings of the live board by this process's console streams (one per filter with viewers"
            " per CONSOLE_BOARD_REFRESH_SECONDS, shared by every stream of that filter).",
            registry=self.registry,
        )
        self.board_streams = Gauge(
            "kickoff_console_board_streams",
            "Live board streams (server-sent events) this process serves now.",
            registry=self.registry,
        )
        self.readiness = Gauge(
            "kickoff_readiness_service_ok",
            "Whether each service answered this process's last round of /readyz probes (1) or failed (0);"
            " a scrape of /metrics runs a round when the kept answer is older than 2 s.",
            ["service"],
            registry=self.registry,
        )
        self.registry.register(
            SharedStateCollector(
                ctx, cache_seconds=ctx.settings.metrics_cache_seconds, reads=self.shared_state_reads
            )
        )
        self.registry.register(set_aside_counter())  # items this process's loops set aside
        self.registry.register(verification_failures())  # this process's failed verify-archive calls

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        """Time a request if it is a trigger or trade route."""
        if path.startswith(TIMED_PREFIXES):
            self.trigger_latency.labels(route=path, status=str(status)).observe(seconds)

    def observe_readiness(self, services: dict[str, str]) -> None:
        """Record a round of readiness probes: each service ``ok`` or not."""
        for service, state in services.items():
            self.readiness.labels(service=service).set(1 if state == "ok" else 0)


class SharedStateCollector(Collector):
    """Reads the deployment's state from PostgreSQL and Redis, at most once per ``cache_seconds``.

    Scrapes within that window get the metrics read last; concurrent scrapes share one reading.
    The listener board is read through a BoardCache (under the lock): only what changed since.
    """

    def __init__(self, ctx: ApiContext, *, cache_seconds: float, reads: PromCounter) -> None:
        self.ctx = ctx
        self.cache_seconds = cache_seconds
        self.reads = reads
        self._lock = threading.Lock()
        self._read_at = -math.inf
        self._metrics: list[Metric] = []

        self._board = BoardCache()

    def describe(self) -> list[Metric]:
        return []  # collected on demand; nothing to describe at registration

    def collect(self) -> Iterator[Metric]:

        with self._lock:
            if time.monotonic() - self._read_at >= self.cache_seconds:
                try:
                    self._metrics = list(self._read())
                finally:
                    release_connection()  # this thread's connection goes back to the pool
                self._read_at = time.monotonic()
                self.reads.inc()
            metrics = self._metrics
        yield from metrics

    def _read(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "kickoff_metrics_source_up", "Whether a metrics source answered this scrape.", labels=["source"]
        )
        for source, read in (
            ("listeners", self._listeners),
            ("outbox", self._outbox),
            ("runs", self._runs),
            ("trades", self._trades),
            ("scheduler", self._scheduler),
        ):
            try:
                metrics = list(read())
            except KickoffError as exc:
                logger.warning("metrics source %s did not answer: %s", source, exc)
                up.add_metric([source], 0)
                continue
            up.add_metric([source], 1)
            yield from metrics
        yield up

    def _listeners(self) -> Iterator[Metric]:

        entries = listener_board(
            settings=self.ctx.settings, coordination=self.ctx.coordination, cache=self._board
        )
        badges = Counter(e.badge for e in entries)
        by_badge = GaugeMetricFamily(
            "kickoff_listeners",
            "Matches on the listener board by badge of their newest run.",
            labels=["badge"],
        )
        for badge in [*(b.value for b in Badge), "-"]:
            by_badge.add_metric([badge], badges.get(badge, 0))
        yield by_badge
        ages = [e.heartbeat_age_s for e in entries if e.heartbeat_age_s is not None]
        yield GaugeMetricFamily(
            "kickoff_listener_oldest_heartbeat_age_seconds",
            "Heartbeat age of the oldest open listener run (0 without an open run).",
            value=max(ages, default=0.0),
        )
        yield GaugeMetricFamily(
            "kickoff_listener_exhausted_matches",
            "Matches whose failed starts reached the attempt cap (dispatch skips them).",
            value=sum(1 for e in entries if e.exhausted),
        )
        starts, failures = start_and_failure_counts([int(c) for c in SUCCESS_CODES])
        yield CounterMetricFamily(
            "kickoff_listener_starts", "Listener runs started (lifecycle rows written).", value=starts
        )
        yield CounterMetricFamily(
            "kickoff_listener_failures", "Listener runs that ended with a failure exit code.", value=failures
        )
        gaps, backfilled, unrecovered = gap_totals()
        failed = failed_verification_count()
        yield CounterMetricFamily(
            "kickoff_listener_gaps",
            "Stream gaps listener runs recorded (sum over lifecycle rows).",
            value=gaps,
        )
        yield CounterMetricFamily(
            "kickoff_events_backfilled",
            "Events listener runs recovered after gaps, from a resume replay or the play-by-play.",
            value=backfilled,
        )
        yield CounterMetricFamily(
            "kickoff_events_unrecovered",
            "Events still missing from the archive at a run's close (sum over lifecycle rows).",
            value=unrecovered,
        )
        yield self._takeovers()
        yield GaugeMetricFamily(
            "kickoff_archive_verifications_failed",
            "Matches whose last archive verification found missing, extra or differing events.",
            value=failed,
        )

    def _takeovers(self) -> Metric:
        """``kickoff_listener_takeover_seconds`` by path, from the takeover rows (lifecycle.takeover)."""

        family = HistogramMetricFamily(
            "kickoff_listener_takeover_seconds",
            "Seconds from a listener run's close to its successor's first live byte, by how the successor"
            " took the match over: death_seen (its worker's liveness signal ended), lease_lapsed (its worker"
            " lease ran out: a pause, a frozen host, a partition), handoff (a graceful shutdown).",
            labels=["path"],
        )
        read = takeover_histogram(BUCKETS)
        for path in TakeoverPath:
            counts, n, total = read.get(str(path), ([0] * len(BUCKETS), 0, 0.0))
            family.add_metric(
                [str(path)],
                [*((str(b), c) for b, c in zip(BUCKETS, counts, strict=True)), ("+Inf", n)],
                total,
            )
        return family

    def _outbox(self) -> Iterator[Metric]:

        report = outbox_report(dead_limit=0)
        backlog = GaugeMetricFamily(
            "kickoff_outbox_backlog", "Pending outbox rows not held, by queue.", labels=["queue"]
        )
        for queue, count in sorted(report.backlog_by_queue.items()):
            backlog.add_metric([queue], count)
        yield backlog
        yield GaugeMetricFamily(
            "kickoff_outbox_held", "Pending outbox rows held by a parent.", value=report.held
        )
        yield GaugeMetricFamily(
            "kickoff_outbox_oldest_pending_age_seconds",
            "Age of the oldest pending outbox row not held (0 when none).",
            value=report.oldest_pending_age_seconds or 0.0,
        )
        yield GaugeMetricFamily("kickoff_outbox_dead", "Outbox rows marked dead.", value=report.dead)

        results = GaugeMetricFamily(
            "kickoff_action_results",
            "Reported action results kept late beside a settled action, or set aside unsettled.",
            labels=["state"],
        )
        for state, count in set_aside_results().items():
            results.add_metric([state], count)
        yield results

    def _runs(self) -> Iterator[Metric]:

        counts = run_counts_by_status()
        runs = GaugeMetricFamily("kickoff_runs", "Job runs in run_log by status.", labels=["status"])
        for status in RunStatus:
            runs.add_metric([status.value], counts.get(status.value, 0))
        yield runs
        yield GaugeMetricFamily(
            "kickoff_launcher_slots_in_use",
            "Job runs running now across every launcher (each takes one slot).",
            value=counts.get(RunStatus.RUNNING.value, 0),
        )
        yield GaugeMetricFamily(
            "kickoff_run_outbox_dead",
            "Run outbox rows set aside: their payload is not their run's RunCommand (last_error says why).",
            value=dead_outbox_count(),
        )
        yield GaugeMetricFamily(
            "kickoff_launcher_cap",
            "Slots of one launcher (LAUNCHER_CAP).",
            value=self.ctx.settings.launcher_cap,
        )

    def _trades(self) -> Iterator[Metric]:

        counts = trade_claim_counts()
        claims = GaugeMetricFamily(
            "kickoff_trade_claims",
            "Trade claims in execution_log by status (uncertain and set_aside wait for an operator).",
            labels=["status"],
        )
        for status in ExecutionStatus:
            claims.add_metric([status.value], counts.get(status.value, 0))
        yield claims

    def _scheduler(self) -> Iterator[Metric]:

        newest = self.ctx.coordination.ticks.newest_tick_at()
        yield GaugeMetricFamily(
            "kickoff_scheduler_last_tick_age_seconds",
            "Seconds since the minute slot of the newest tick a scheduler sent (`kickoff check`'s"
            " scheduler liveness); +Inf when none is kept (a tick is kept SCHEDULER_TICK_TTL_SECONDS).",
            value=math.inf if newest is None else max(0.0, (utcnow() - newest).total_seconds()),
        )
