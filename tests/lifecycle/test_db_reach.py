"""A listener worker cut from PostgreSQL takes no start (docs/reliability.md finding 6).

A start's first steps read PostgreSQL; a worker that cannot reach it would take a takeover's
start from the queue and hold it until its connection's deadline, while a worker elsewhere could
stream the match. lifecycle.db_reach probes PostgreSQL and the start gate (actors.draining) closes
while it does not answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from actors.draining import DrainableConsumer, gate_starts_on
from config.errors import DatabaseUnavailable
from harness.faultproxy import FaultProxy
from lifecycle.db_reach import DatabaseReach
from lifecycle.errors import StartGivenBack
from lifecycle.runtime import ListenerServices
from models.db import init_database
from tests.lifecycle.conftest import CountingStarts

#: Generous: the probe runs every half second and calls a probe hung after two.
WAIT_SECONDS = 30.0


def _cut() -> DatabaseUnavailable:
    return DatabaseUnavailable(service="PostgreSQL", setting="DATABASE_URL", address="db", reason="cut")


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.05)


# -- the probe's verdict ----------------------------------------------------------------------


def test_the_probe_reaches_postgresql_only_after_an_answer_and_not_after_a_failure():
    answer = [False]

    def probe() -> None:
        if not answer[0]:
            raise _cut()

    reach = DatabaseReach(probe=probe)
    assert not reach.reachable()  # never answered yet
    reach.probe_once()
    assert not reach.reachable()
    answer[0] = True
    reach.probe_once()
    assert reach.reachable()
    reach.unreachable()  # a start met PostgreSQL unreachable: closed until the next answer
    assert not reach.reachable()
    reach.probe_once()
    assert reach.reachable()


def test_a_probe_without_an_answer_past_the_bound_means_postgresql_is_not_reached():
    release = threading.Event()
    hanging = [False]

    def probe() -> None:
        if hanging[0]:
            release.wait(WAIT_SECONDS)  # a black hole: the statement waits for its deadline

    reach = DatabaseReach(probe=probe, hang_seconds=0.2)
    reach.probe_once()
    asked = time.monotonic()
    hanging[0] = True
    thread = threading.Thread(target=reach.probe_once, daemon=True)
    thread.start()
    assert reach.reachable(asked)  # a probe just asked: not judged yet
    _wait_for(lambda: not reach.reachable(), "a hung probe closes the gate")
    reach.probe_once()  # a probe already in flight: nothing
    hanging[0] = False
    release.set()
    thread.join(WAIT_SECONDS)
    assert reach.reachable()  # the hung probe answered once the link was back


# -- a listener worker's services -------------------------------------------------------------


@pytest.mark.parametrize("cut", ["refuse", "blackhole"])
def test_a_listener_worker_cut_from_postgresql_takes_no_start_until_postgresql_answers_again(
    lsettings, lcoordination, rebind, starts_ungated, cut
):
    """Its lease and liveness signal stay held (Redis answers): only the probe closes the gate."""
    with FaultProxy(("127.0.0.1", 5432)) as proxy:
        init_database(
            proxy.url_via(lsettings.database_url), connect_timeout_seconds=1, statement_timeout_seconds=5
        )
        svc = ListenerServices(settings=lsettings, coordination=lcoordination)
        try:
            svc.start()
            gate_starts_on(svc.ready_for_starts)
            inner = CountingStarts()
            consumer = DrainableConsumer(inner)  # type: ignore[arg-type]
            _wait_for(svc.ready_for_starts, "a worker that reaches PostgreSQL takes starts")
            assert next(consumer) == "start" and inner.fetches == 1
            getattr(proxy, cut)()
            _wait_for(lambda: not svc.ready_for_starts(), f"a worker cut from PostgreSQL ({cut}) takes none")
            assert svc.lease.current() is not None and svc.liveness.held()  # Redis still answers
            assert next(consumer) is None and inner.fetches == 1  # left in the queue for the others
            proxy.forward()
            _wait_for(svc.ready_for_starts, "taking starts again once PostgreSQL answers")
            assert next(consumer) == "start" and inner.fetches == 2
        finally:
            svc.shutdown_all()
            svc.close()


def test_a_start_that_met_postgresql_unreachable_closes_the_gate_at_once(
    make_match, lsettings, lcoordination, services, monkeypatch
):
    """Before the next probe: the starts after it go to the other workers."""
    from lifecycle import guarded_start

    match = make_match(status="inprogress")
    services.database.probe_once()
    assert services.database.reachable()

    def unreachable(match_id):
        raise _cut()

    monkeypatch.setattr(guarded_start, "stored_message_id", unreachable)
    with pytest.raises(StartGivenBack):  # its message goes back to the queue (test_prompt_restarts.py)
        guarded_start.start_match_listener(
            str(match.id),
            None,
            False,
            message_id="m-1",
            settings=lsettings,
            coordination=lcoordination,
            services=services,
        )
    assert not services.database.reachable()
