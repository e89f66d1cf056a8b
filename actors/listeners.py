"""Listener actors: dispatch, start, stop and sweep; thin wrappers over the lifecycle library.

start_match_listener runs on the ``match_listeners`` queue with no time limit and no retries
(failed starts are counted by the attempt counter, not retried), except a start given back
(StartGivenBack: PostgreSQL or Redis did not answer before it took its lock or before its run
began), which goes back to the queue within seconds; the others run on ``default``.
A failed start raises, so its message fails (and, with SENTRY_DSN, is one report: actors.reporting).
"""

from __future__ import annotations

import logging
from typing import Any

import dramatiq
from dramatiq.middleware import CurrentMessage

from actors import reporting
from actors.actor_runtime import ActorRuntime, current, listener_settings
from actors.archive import send_backfill
from actors.batch import enqueue_many
from actors.broker import QUEUE_DEFAULT, QUEUE_MATCH_LISTENERS, broker_errors, worker_hooks
from actors.draining import gate_starts_on, resume_taking_starts, starts_sent, stop_taking_starts
from actors.fetched_starts import FetchedStarts
from actors.rabbitmq import settle_early
from config.errors import KickoffError
from lifecycle import cleanup, dispatch, guarded_start, liveness
from lifecycle.dispatch import StartMessage
from lifecycle.errors import ListenerRunFailed, StartGivenBack
from lifecycle.runtime import ListenerServices
from models.boundary import connection
from models.match import match_labels
from models.start_messages import new_message_id, save_message_ids

logger = logging.getLogger(__name__)

#: While a worker's liveness signal is gone within its grace, how often the reaper that saw it judges
#: it again (in Redis alone): the death is seen this soon after the grace ends, not a watch later.
REJUDGE_SECONDS = 0.01


def services() -> ListenerServices:
    """The process's listener services; their shutdown hook is registered with the broker.

    They hold the process's worker lease, and their reaper thread restarts at once the matches
    of listener workers whose lease is gone (also those whose run closed its row but could not
    release its start lock: a worker cut from Redis; and those whose fenced run's lock and
    pending key a Redis restart lost: ``cleanup.orphans_of_fenced_runs``; and those whose run gave the
    match back but could not close its row: ``cleanup.close_given_back_rows``); a shutdown hands this
    process's runs over to successor starts queued for other workers (lifecycle.runtime
    ``shutdown_all``).
    """
    settings = listener_settings()
    rt = current()
    watched: list[str] = []  # the worker leases the last full step judged (open rows', every worker's)
    fetched = FetchedStarts(rt.broker)  # the starts dead workers had fetched (the Redis broker)

    def reap() -> list[str]:
        # Between full steps (every LISTENER_REAPER_POLL_SECONDS) the reaper thread only watches the
        # leases the last one read, in Redis (every LISTENER_LIVENESS_WATCH_SECONDS): a dead one's rows
        # are abandoned at once (the watch's fast path), a lapsed one makes the full step run at once.
        fetched.record(svc.lease.current())
        grace = rt.settings.listener_liveness_grace_seconds
        if svc.liveness.steady_for() < liveness.UNSTEADY_GRACE_SECONDS:
            # This worker's own signal dropped just now: Redis may have dropped every connection at
            # once (a restart), and every worker is subscribing again: judge with the longer grace.
            grace = max(grace, liveness.UNSTEADY_GRACE_SECONDS)
        if not svc.reaper.full_step_due():
            if not watched:  # no worker ran a match at the last full step: nothing to watch until the next
                return []
            seen = cleanup.watch_worker_leases(
                watched, settings=rt.settings, coordination=rt.coordination, grace_seconds=grace
            )
            if seen.lost:
                svc.reaper.soon(REJUDGE_SECONDS)
            if seen.dead:
                # A death: its matches first (one write, then their dispatch); these leases are not
                # watched again before the next full step, and the others are watched again at once
                # (a lapsed one among them runs the full step then).
                closed = cleanup.reap_workers_seen_dead(seen.dead, coordination=rt.coordination)
                begun = cleanup.release_starts_of_dead(seen.dead, coordination=rt.coordination)
                fetched.requeue_of(seen.dead)
                watched[:] = [lease for lease in watched if lease not in seen.dead]
                svc.reaper.soon(REJUDGE_SECONDS)
                return sorted({row.match_id for row in closed} | set(begun))
            if not seen.due:
                return []
        # Orphans first: a match the two steps after it free is not taken for one (its restart
        # mark stays unused, for the case that restart fails on a worker cut from PostgreSQL).
        orphans = cleanup.orphans_of_fenced_runs(settings=rt.settings, coordination=rt.coordination)
        lost: list[str] = []
        dead: list[str] = []
        closed = cleanup.reap_dead_workers(
            settings=rt.settings,
            coordination=rt.coordination,
            signal_lost=lost,
            leases_seen=watched,
            grace_seconds=grace,
            dead_leases=dead,
        )
        begun = cleanup.release_starts_of_dead(dead, coordination=rt.coordination)
        fetched.requeue_of(dead)
        svc.reaper.watching(len(watched))
        if lost:  # a worker's liveness signal is gone: judge it again until its grace ends
            svc.reaper.soon(REJUDGE_SECONDS)
        freed = cleanup.release_locks_of_fenced_runs(settings=rt.settings, coordination=rt.coordination)
        given_back = cleanup.close_given_back_rows(coordination=rt.coordination)
        return sorted(
            {row.match_id for row in closed} | set(begun) | set(freed) | set(orphans) | set(given_back)
        )

    def redispatch(match_ids: list[str]) -> None:
        dispatch.dispatch_matches(
            match_ids, settings=rt.settings, coordination=rt.coordination, send_batch=send_starts
        )

    def hand_over(match_ids: list[str]) -> None:
        messages = [StartMessage(match_id=m, message_id=new_message_id(m), handoff=True) for m in match_ids]
        save_message_ids([(m.match_id, m.message_id) for m in messages])
        send_starts(messages)

    svc = ListenerServices.for_process(
        lambda: ListenerServices(
            settings=settings,
            coordination=rt.coordination,
            reap=reap,
            redispatch=redispatch,
            hand_over=hand_over,
        )
    )
    hooks = worker_hooks(rt.broker)
    if hooks is not None:
        hooks.register(stop_taking_starts)  # first: the successor starts must reach other workers
        hooks.register(svc.shutdown_all)
    return svc


def register_boot_hook() -> None:
    """Have every worker process of this broker run ``read_listener_settings`` before its threads start
    and ``start_listener_services`` once booted."""
    hooks = worker_hooks(current().broker)
    if hooks is not None:
        hooks.register_boot_check(read_listener_settings)
        hooks.register_boot(start_listener_services)


def runs_listeners(worker: dramatiq.Worker) -> bool:
    """Whether ``worker`` consumes ``match_listeners``: its ``--queues`` name it, or it has none.

    Dramatiq keeps ``--queues`` as ``consumer_whitelist`` (None: every queue); a Worker has no ``queues``.
    """
    queues = getattr(worker, "consumer_whitelist", None)
    return not queues or QUEUE_MATCH_LISTENERS in queues


def read_listener_settings(worker: dramatiq.Worker) -> None:
    """Before a worker's threads start: one that runs listeners reads its MatchListenerEnvironment.

    ``actors.actor_runtime.listener_settings``: an invalid ``LISTENER_*`` value stops that worker at start
    (BootCheckFailed, from the ConfigurationError naming the setting), before it takes a message. A
    worker of the ``default`` queue only, like every process that only sends messages, never reads them.
    """
    if runs_listeners(worker):
        listener_settings()


def start_listener_services(worker: dramatiq.Worker) -> None:
    """At worker boot: a process that consumes ``match_listeners`` takes its lease and starts reaping.

    So a listener worker that (re)starts after another one was killed restarts the dead one's
    matches within seconds, before any start message reaches it.
    """
    if runs_listeners(worker):
        resume_taking_starts()
        svc = services()
        # A start needs the lease and its liveness signal (and Redis): without them, leave the starts
        # to workers that have them.
        gate_starts_on(svc.ready_for_starts)
        svc.import_listener_body()


def _attempts(rt: ActorRuntime, match_id: str) -> int | None:
    """The failed-start counter of a match (None when Redis cannot tell)."""
    try:
        return rt.coordination.barriers.attempts(match_id)
    except KickoffError:
        return None


def start_message(message: StartMessage) -> dramatiq.Message:
    """The Dramatiq message of a start, with its pre-assigned message id."""
    return dramatiq.Message(
        queue_name=start_match_listener.queue_name,
        actor_name=start_match_listener.actor_name,
        args=(),
        kwargs={
            "match_id": message.match_id,
            "overrides": message.overrides,
            "force": message.force,
            **({"handoff": True} if message.handoff else {}),
        },
        options={},
        message_id=message.message_id,
    )


def send_start(message: StartMessage) -> None:
    """Send one start_match_listener message with its pre-assigned message id."""
    broker = current().broker
    with broker_errors(broker):
        broker.enqueue(start_message(message))
    starts_sent()


def send_starts(messages: list[StartMessage]) -> None:
    """Send many start messages at once (the dispatch tick): one Redis round trip, or one confirmed
    RabbitMQ batch."""
    broker = current().broker
    with broker_errors(broker):
        enqueue_many(broker, [start_message(m) for m in messages])
    starts_sent()  # this process's idle consumer fetches them now (a reaper's takeover)


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def dispatch_upcoming_match_listeners(within_minutes: int | None = None, is_test: bool | None = None) -> dict:
    """Find matches needing a listener and enqueue one start per match (under the dispatch lock)."""
    rt = current()
    result = dispatch.dispatch_upcoming_match_listeners(
        within_minutes=within_minutes,
        is_test=is_test,
        settings=rt.settings,
        coordination=rt.coordination,
        send=send_start,
        send_batch=send_starts,
    )
    return result.as_dict()


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def dispatch_upcoming_test_match_listeners() -> dict:
    """Develop's periodic dispatch: test clones only (is_test=True)."""
    return dispatch_upcoming_match_listeners.fn(is_test=True)


#: How many times a start given back (StartGivenBack) goes back to the queue, and the bounds (ms) of
#: the wait before each (doubling, with jitter): about ten minutes of a worker cut from a service.
GIVE_BACK_RETRIES = 150
GIVE_BACK_MIN_BACKOFF_MS = 500
GIVE_BACK_MAX_BACKOFF_MS = 4000


def given_back(retries: int, exception: BaseException) -> bool:
    """Dramatiq's ``retry_when`` of a start: only a start given back is sent again, a bounded number of
    times (every other failure is counted by the attempt counter, not retried).

    The copy goes back through the broker's delay queue with the same message id (its stored id):
    a worker that reaches PostgreSQL and Redis runs it (the others take no start: actors.draining).
    """
    return isinstance(exception, StartGivenBack) and retries < GIVE_BACK_RETRIES


@dramatiq.actor(
    queue_name=QUEUE_MATCH_LISTENERS,
    max_retries=0,
    retry_when=given_back,
    min_backoff=GIVE_BACK_MIN_BACKOFF_MS,
    max_backoff=GIVE_BACK_MAX_BACKOFF_MS,
    time_limit=float("inf"),
)
def start_match_listener(
    match_id: str, overrides: dict[str, Any] | None = None, force: bool = False, handoff: bool = False
) -> dict:
    """Run the listener of one match for the whole game (see lifecycle.guarded_start).

    ``handoff``: sent by a worker's graceful shutdown while the match still streams there.
    """
    settings = listener_settings()
    rt = current()
    message = CurrentMessage.get_current_message()
    reporting.tag_listener_start(str(match_id))
    try:
        result = guarded_start.start_match_listener(
            match_id,
            overrides,
            force,
            message_id=message.message_id if message is not None else None,
            settings=settings,
            coordination=rt.coordination,
            services=services(),
            on_consumed=(lambda: settle_early(message)) if message is not None else None,
            handoff=handoff,
        )
    except StartGivenBack:  # nothing was done: the message goes back to the queue (given_back)
        raise
    except KickoffError:  # a settings error or an unknown match: a failed start, counted
        reporting.tag_failed_attempt(sr_id=None, exit_code=None, attempt=_attempts(rt, match_id))
        raise
    if not result.success:
        label = _label(result.match_id)
        reporting.tag_failed_attempt(
            sr_id=result.sr_id, exit_code=result.exit_code, attempt=result.attempts, match=label
        )
        named = f" ({label})" if label else ""
        raise ListenerRunFailed(
            f"match {result.match_id}{named}: listener exited {result.exit_code} ({result.reason}); "
            f"failed start {result.attempts}"
        )
    return result.as_dict()


def _label(match_id: str) -> str | None:
    """The failure report's name of the match, "HOU @ KC (mlb)" (None when it cannot be read now)."""
    try:
        with connection():
            return match_labels([str(match_id)]).get(str(match_id))
    except KickoffError:
        return None


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def stop_match_listener(match_id: str, stopped_by: str = "operator") -> dict:
    """Operator stop: exit 15 within the poll interval, queued start revoked, auto-dispatch off."""
    rt = current()
    return cleanup.stop_match_listener(
        match_id, settings=rt.settings, coordination=rt.coordination, stopped_by=stopped_by
    ).as_dict()


@dramatiq.actor(queue_name=QUEUE_DEFAULT, max_retries=0)
def sweep_stale_match_listeners(heartbeat_stale_seconds: float | None = None) -> dict:
    """Close stale open rows as Abandoned (14) and clear the barriers of dead matches.

    The matches whose rows it closed are dispatched again at once, as a listener worker's reaper
    dispatches the ones it closes: a sweep that reaps a dead worker's rows before that reaper does
    must not leave them waiting for the next dispatch tick.
    """
    rt = current()
    result = cleanup.sweep_stale_match_listeners(
        heartbeat_stale_seconds=heartbeat_stale_seconds,
        settings=rt.settings,
        coordination=rt.coordination,
        send_backfill=send_backfill,
    )
    again = sorted(set(result.matches) | set(result.locks_released))
    if again:
        dispatch.dispatch_matches(
            again, settings=rt.settings, coordination=rt.coordination, send_batch=send_starts
        )
    return result.as_dict()


register_boot_hook()
