"""Actor wiring on Dramatiq's StubBroker: which actor is on which queue, its options, the messages the
senders build, the broker's middleware, and what an actor hands the library when a worker runs it.

No service: the runtime runs on a StubBroker and the in-memory coordination store
(``actors.actor_runtime.configure(broker=..., coordination=...)``); the library functions the actors call
are replaced by recorders. That real workers on Redis and RabbitMQ run these actors is proven by
tests/lifecycle/test_actors.py and the worker tests.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import CurrentMessage

from actors.broker import QUEUE_DEFAULT, QUEUE_MATCH_LISTENERS, QUEUES, build_broker
from config.settings import AppEnv
from lifecycle.dispatch import DispatchResult, StartMessage
from scheduler.table import PERIODIC, entries_for
from tests.fakes.coordination import MemoryCoordinationStore


@pytest.fixture
def stub(lsettings) -> Iterator[StubBroker]:
    """This process's actors on a StubBroker and the in-memory store until the test ends."""
    from actors import actor_runtime

    original = actor_runtime.current()
    broker = StubBroker()
    broker.add_middleware(CurrentMessage())
    for queue in QUEUES:
        broker.declare_queue(queue)
    actor_runtime.configure(
        lsettings, broker=broker, coordination=MemoryCoordinationStore.from_settings(lsettings)
    )
    yield broker
    actor_runtime.configure(original.settings, broker=original.broker, coordination=original.coordination)
    broker.close()


@pytest.fixture
def worker(stub: StubBroker) -> Iterator[dramatiq.Worker]:
    worker = dramatiq.Worker(stub, worker_timeout=50, worker_threads=1)
    worker.start()
    yield worker
    worker.stop()


def actors_by_name() -> dict[str, dramatiq.Actor]:
    import actors  # noqa: F401  declares every actor

    return dict(dramatiq.get_broker().actors)


# -- queues and options ---------------------------------------------------------------------


def test_only_the_listener_start_runs_on_the_match_listeners_queue() -> None:
    on_listeners = sorted(n for n, a in actors_by_name().items() if a.queue_name == QUEUE_MATCH_LISTENERS)
    assert on_listeners == ["start_match_listener"]


def test_every_other_actor_runs_on_the_default_queue() -> None:
    queues = {a.queue_name for n, a in actors_by_name().items() if n != "start_match_listener"}
    assert queues == {QUEUE_DEFAULT}


@pytest.mark.parametrize("name", sorted(actors_by_name()))
def test_no_actor_is_retried_by_dramatiq(name: str) -> None:
    """Only a start given back (StartGivenBack: it did nothing) goes back to the queue."""
    from actors.listeners import given_back

    assert actors_by_name()[name].options.get("max_retries") == 0
    assert actors_by_name()[name].options.get("retry_when") is (
        given_back if name == "start_match_listener" else None
    )


def test_the_actors_of_every_module_are_declared() -> None:
    names = set(actors_by_name())
    for expected in (
        "dispatch_upcoming_match_listeners",
        "dispatch_upcoming_test_match_listeners",
        "start_match_listener",
        "stop_match_listener",
        "sweep_stale_match_listeners",
        "drain_outbox",
        "tick_job_runs",
        "prune_audit_log",
        "refresh_league_schedule",
    ):
        assert expected in names


@pytest.mark.parametrize("entry", PERIODIC, ids=[e.name for e in PERIODIC])
def test_every_periodic_entry_calls_a_default_queue_actor_with_arguments_it_takes(entry) -> None:
    actor = actors_by_name()[entry.actor]
    assert actor.queue_name == QUEUE_DEFAULT
    inspect.signature(actor.fn).bind(**entry.kwargs)


def test_periodic_entry_names_are_unique() -> None:
    names = [e.name for e in PERIODIC]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("env", list(AppEnv))
def test_exactly_one_listener_dispatch_runs_every_minute_in_each_app_env(env: AppEnv) -> None:
    dispatches = [e for e in entries_for(env) if e.actor.startswith("dispatch_upcoming")]
    assert len(dispatches) == 1 and dispatches[0].cron == "* * * * *"


# -- the messages the senders build -------------------------------------------------------------


def test_a_start_message_carries_its_pre_assigned_id_and_no_handoff_flag(stub: StubBroker) -> None:
    from actors.listeners import send_start

    send_start(StartMessage(match_id="m1", message_id="start-match-listener.m1.x", overrides={"a": 1}))
    (message,) = [dramatiq.Message.decode(raw) for raw in stub.queues[QUEUE_MATCH_LISTENERS].queue]
    assert message.message_id == "start-match-listener.m1.x"
    assert message.actor_name == "start_match_listener"
    assert message.kwargs == {"match_id": "m1", "overrides": {"a": 1}, "force": False}
    assert stub.queues[QUEUE_DEFAULT].qsize() == 0


def test_a_handoff_start_says_so(stub: StubBroker) -> None:
    from actors.listeners import start_message

    message = start_message(StartMessage(match_id="m1", message_id="id", force=True, handoff=True))
    assert message.kwargs == {"match_id": "m1", "overrides": None, "force": True, "handoff": True}
    assert message.queue_name == QUEUE_MATCH_LISTENERS


def test_a_batch_of_starts_is_enqueued_in_order(stub: StubBroker) -> None:
    from actors.listeners import send_starts

    send_starts([StartMessage(match_id=f"m{i}", message_id=f"id{i}") for i in range(5)])
    queued = [dramatiq.Message.decode(raw) for raw in stub.queues[QUEUE_MATCH_LISTENERS].queue]
    assert [m.message_id for m in queued] == [f"id{i}" for i in range(5)]


def test_an_empty_batch_sends_nothing(stub: StubBroker) -> None:
    from actors.listeners import send_starts

    send_starts([])
    assert stub.queues[QUEUE_MATCH_LISTENERS].qsize() == 0


def test_a_start_message_is_accepted_by_the_start_actor_signature(stub: StubBroker) -> None:
    from actors.listeners import start_match_listener, start_message

    message = start_message(StartMessage(match_id="m1", message_id="id", handoff=True))
    inspect.signature(start_match_listener.fn).bind(*message.args, **message.kwargs)


# -- what a worker hands the library ------------------------------------------------------------


def test_the_develop_dispatch_asks_for_test_clones_only_with_the_runtime_store(
    stub: StubBroker, worker: dramatiq.Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors import actor_runtime, listeners

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(
        listeners.dispatch,
        "dispatch_upcoming_match_listeners",
        lambda **kw: calls.append(kw) or DispatchResult(),
    )
    listeners.dispatch_upcoming_test_match_listeners.send()
    stub.join(QUEUE_DEFAULT, fail_fast=True)
    worker.join()
    (call,) = calls
    assert call["is_test"] is True and call["within_minutes"] is None
    assert call["coordination"] is actor_runtime.current().coordination
    assert call["send"] is listeners.send_start and call["send_batch"] is listeners.send_starts


def test_a_start_runs_with_its_message_id(
    stub: StubBroker, worker: dramatiq.Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors import listeners

    seen: list[dict[str, Any]] = []

    def run(match_id: str, overrides: Any, force: bool, **kw: Any) -> Any:
        seen.append({"match_id": match_id, "force": force, **kw})
        return SimpleNamespace(success=True, as_dict=lambda: {"match_id": match_id})

    monkeypatch.setattr(listeners.guarded_start, "start_match_listener", run)
    monkeypatch.setattr(listeners, "services", lambda: "the process's services")
    listeners.send_start(StartMessage(match_id="m1", message_id="start-match-listener.m1.abc"))
    stub.join(QUEUE_MATCH_LISTENERS, fail_fast=True)
    worker.join()
    (call,) = seen
    assert (call["match_id"], call["message_id"], call["force"], call["handoff"]) == (
        "m1",
        "start-match-listener.m1.abc",
        False,
        False,
    )
    assert call["services"] == "the process's services" and callable(call["on_consumed"])


def test_a_failed_start_fails_its_message(
    stub: StubBroker, worker: dramatiq.Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors import listeners

    failed = SimpleNamespace(success=False, match_id="m1", exit_code=9, reason="boom", attempts=2, sr_id=None)
    monkeypatch.setattr(listeners.guarded_start, "start_match_listener", lambda *a, **kw: failed)
    monkeypatch.setattr(listeners, "services", lambda: None)
    listeners.send_start(StartMessage(match_id="m1", message_id="id-failed"))
    stub.join(QUEUE_MATCH_LISTENERS, fail_fast=False)
    worker.join()
    (dead,) = stub.dead_letters_by_queue[QUEUE_MATCH_LISTENERS]
    assert dead.message_id == "id-failed"


def test_a_start_given_back_runs_again_with_the_same_message_id(
    stub: StubBroker, worker: dramatiq.Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors import listeners
    from lifecycle.errors import StartGivenBack

    seen: list[str] = []

    def run(match_id: str, overrides: Any, force: bool, *, message_id: str, **kw: Any) -> Any:
        seen.append(message_id)
        if len(seen) == 1:  # a worker cut from PostgreSQL or Redis: it did nothing
            raise StartGivenBack("cut")
        return SimpleNamespace(success=True, as_dict=lambda: {"match_id": match_id})

    monkeypatch.setattr(listeners.guarded_start, "start_match_listener", run)
    monkeypatch.setattr(listeners, "services", lambda: None)
    listeners.send_start(StartMessage(match_id="m1", message_id="id-given-back"))
    stub.join(QUEUE_MATCH_LISTENERS, fail_fast=False)
    worker.join()
    assert seen == ["id-given-back", "id-given-back"]
    assert not stub.dead_letters_by_queue[QUEUE_MATCH_LISTENERS]


def test_an_operator_stop_names_who_stopped(
    stub: StubBroker, worker: dramatiq.Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors import listeners

    seen: list[tuple[str, str]] = []

    def stop(match_id: str, *, stopped_by: str, **_: Any) -> Any:
        seen.append((match_id, stopped_by))
        return SimpleNamespace(as_dict=dict)

    monkeypatch.setattr(listeners.cleanup, "stop_match_listener", stop)
    listeners.stop_match_listener.send("m1", stopped_by="api:key-1")
    listeners.stop_match_listener.send("m2")
    stub.join(QUEUE_DEFAULT, fail_fast=True)
    worker.join()
    assert sorted(seen) == [("m1", "api:key-1"), ("m2", "operator")]


def test_a_sweep_dispatches_again_only_the_matches_it_closed_or_freed(
    stub: StubBroker, worker: dramatiq.Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors import listeners

    swept = iter(
        [
            SimpleNamespace(matches=["m2", "m1"], locks_released=["m3", "m1"], as_dict=dict),
            SimpleNamespace(matches=[], locks_released=[], as_dict=dict),
        ]
    )
    redispatched: list[list[str]] = []
    monkeypatch.setattr(listeners.cleanup, "sweep_stale_match_listeners", lambda **_: next(swept))
    monkeypatch.setattr(listeners.dispatch, "dispatch_matches", lambda ids, **_: redispatched.append(ids))
    listeners.sweep_stale_match_listeners.send()
    stub.join(QUEUE_DEFAULT, fail_fast=True)
    listeners.sweep_stale_match_listeners.send()
    stub.join(QUEUE_DEFAULT, fail_fast=True)
    worker.join()
    assert redispatched == [["m1", "m2", "m3"]]  # closed rows and fenced runs' freed locks, once each


# -- the broker kickoff builds ----------------------------------------------------------------------


def middleware_names(broker: dramatiq.Broker) -> list[str]:
    return [type(m).__name__ for m in broker.middleware]


def test_the_redis_broker_has_kickoffs_middleware_in_order(lsettings) -> None:
    broker = build_broker(lsettings.model_copy(update={"dramatiq_prometheus": False}))
    names = middleware_names(broker)
    kickoff = [n for n in names if n in {
        "CurrentMessage", "ScheduledTickMiddleware", "LogContextMiddleware",
        "DatabaseConnectionMiddleware", "WorkerHooks", "WorkerPresence",
    }]  # fmt: skip
    assert kickoff == [
        "CurrentMessage",
        "ScheduledTickMiddleware",
        "LogContextMiddleware",
        "DatabaseConnectionMiddleware",
        "WorkerHooks",
        "WorkerPresence",
    ]
    assert names[-1] == "WorkerPresence"
    assert "LoopbackPrometheus" not in names
    assert set(QUEUES) <= broker.get_declared_queues()
    assert broker.namespace == lsettings.broker_namespace


def test_the_prometheus_middleware_comes_only_with_its_setting(lsettings) -> None:
    broker = build_broker(lsettings.model_copy(update={"dramatiq_prometheus": True}))
    assert middleware_names(broker)[-1] == "LoopbackPrometheus"


def test_an_amqp_broker_url_selects_rabbitmq_with_a_quorum_listener_queue(lsettings) -> None:
    from actors.rabbitmq import KickoffRabbitmqBroker

    amqp = lsettings.model_copy(
        update={"broker_url": "amqp://guest:guest@127.0.0.1:1/%2F", "broker_quorum_queues": True}
    )
    broker = build_broker(amqp)
    assert isinstance(broker, KickoffRabbitmqBroker)
    assert set(QUEUES) <= broker.get_declared_queues()
    assert "WorkerPresence" in middleware_names(broker)


def test_reconfiguring_with_the_same_broker_settings_keeps_the_broker(stub: StubBroker, lsettings) -> None:
    from actors import actor_runtime

    actor_runtime.configure(lsettings)
    assert actor_runtime.current().broker is stub
    assert dramatiq.get_broker() is stub


def test_a_given_broker_takes_every_declared_actor(stub: StubBroker) -> None:
    assert set(stub.actors) == set(actors_by_name())
    assert all(actor.broker is stub for actor in stub.actors.values())


@pytest.mark.parametrize("process_boot", [True, False])
def test_a_worker_process_of_the_dramatiq_command_freezes_its_boot_heap_once_its_boot_hooks_ran(
    process_boot: bool,
) -> None:
    """``dramatiq`` emits process_boot in each worker process it starts; a worker started without it (a
    test's, in the test process) must freeze nothing of that process and leave its collector's
    thresholds as they were."""
    import gc

    from actors.middleware import WORKER_FULL_PASS_AFTER, WorkerHooks

    thresholds = gc.get_threshold()

    broker = StubBroker()
    broker.add_middleware(WorkerHooks())
    in_hook: list[int] = []
    hooks = next(m for m in broker.middleware if isinstance(m, WorkerHooks))
    hooks.register_boot(lambda _worker: in_hook.append(gc.get_freeze_count()))
    before = gc.get_freeze_count()
    if process_boot:
        broker.emit_after("process_boot")
    worker = dramatiq.Worker(broker, worker_threads=1)
    try:
        worker.start()
        after = gc.get_freeze_count()
        booted_thresholds = gc.get_threshold()
    finally:
        worker.stop()
        broker.close()
        if process_boot:
            gc.unfreeze()  # nothing of this test process stays frozen
        gc.set_threshold(*thresholds)
    assert in_hook == [before]  # the boot hooks ran before the freeze
    assert (after > before) is process_boot
    expected = (*thresholds[:2], WORKER_FULL_PASS_AFTER) if process_boot else thresholds
    assert booted_thresholds == expected
