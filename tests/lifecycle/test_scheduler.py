"""The periodic table by app_env, and one send per slot however many schedulers run or restart."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from config.settings import AppEnv
from scheduler.runner import TickSender, slot_of
from scheduler.table import PERIODIC, PeriodicEntry, entries_for
from tests.waiting import wait_for


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ("develop", ["dispatch_upcoming_test_match_listeners"]),
        ("staging", ["dispatch_upcoming_match_listeners", "sweep_stale_match_listeners"]),
        ("production", ["dispatch_upcoming_match_listeners", "sweep_stale_match_listeners"]),
    ],
)
def test_the_table_by_app_env(env, expected):
    entries = entries_for(env)
    assert {e.name for e in entries} >= set(expected)
    listener_names = {e.name for e in entries if "listener" in e.name}
    assert listener_names == set(expected)
    assert all(e.cron == "* * * * *" for e in entries if e.name in expected)


def test_every_entry_names_an_actor_the_broker_knows(lifecycle_env):
    from actors.actor_runtime import current

    for entry in PERIODIC:
        assert entry.actor in current().broker.actors, entry
    assert len({e.name for e in PERIODIC}) == len(PERIODIC)


def _sender(coordination, sent, name="dispatch_upcoming_match_listeners"):
    entry = PeriodicEntry(name, actor=name, cron="* * * * *", envs=frozenset(AppEnv))
    return TickSender(
        entry, send=lambda kw, at: sent.append(at), ticks=coordination.ticks, tick_ttl_seconds=60
    )


def test_a_second_scheduler_or_a_restart_inside_the_minute_sends_nothing_twice(lcoordination):
    sent: list[str] = []
    first = _sender(lcoordination, sent)
    second = _sender(lcoordination, sent)  # another process, or our restart
    assert first.send_with_options(scheduled_at="2030-01-01T10:00:00+00:00") is True
    assert second.send_with_options(scheduled_at="2030-01-01T10:00:37+00:00") is False
    assert first.send_with_options(scheduled_at="2030-01-01T10:00:59+00:00") is False
    assert second.send_with_options(scheduled_at="2030-01-01T10:01:00+00:00") is True
    assert [slot_of(s) for s in sent] == ["20300101T1000", "20300101T1001"]


@pytest.mark.e2e
def test_two_scheduler_processes_send_each_slot_once(subprocess_env, lifecycle_env, tmp_path: Path):
    from models.coordination import connect_redis

    broker = connect_redis(lifecycle_env["BROKER_URL"])
    ns = lifecycle_env["BROKER_NAMESPACE"]
    kickoff = str(Path(sys.executable).parent / "kickoff")
    env = {**subprocess_env, **lifecycle_env}
    logs = [tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"]
    procs = []
    try:
        for log in logs[:2]:
            procs.append(
                subprocess.Popen(
                    [kickoff, "scheduler"], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
                )
            )
        wait_for(lambda: all("tick " in log.read_text() for log in logs[:2]), timeout=30)
        procs[0].kill()  # a restart inside the minute
        procs[0].wait(timeout=10)
        procs.append(
            subprocess.Popen(
                [kickoff, "scheduler"], env=env, stdout=logs[2].open("wb"), stderr=subprocess.STDOUT
            )
        )
        wait_for(lambda: "tick " in logs[2].read_text(), timeout=30)
        time.sleep(0.2)
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    text = "".join(log.read_text() for log in logs)
    sent = text.count(" sent\n") + text.count(" sent\r\n")
    slots = set()
    for line in text.splitlines():
        if " scheduler.runner " in line and "]: tick " in line:
            name, _, when = line.split("]: tick ", 1)[1].partition(" at ")
            slots.add(
                (
                    name,
                    slot_of(when.rsplit(" ", 1)[0] if when.endswith(" sent") else when.split(" already")[0]),
                )
            )
    messages = broker.hlen(f"{ns}:default.msgs")
    for key in broker.scan_iter(match=f"{ns}:*"):
        broker.delete(key)
    assert messages == sent == len(slots)
    assert text.count("already sent by another scheduler") >= 2
