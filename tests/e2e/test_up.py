"""``kickoff up`` with real processes: the board fills with Running listeners, Ctrl-C leaves nothing."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.processes import ProcessGroup
from cli.procfile import ProcfileEntry, read_procfile, select_entries
from cli.up import Printer, child_argv, up_games
from config.errors import ConfigurationError
from harness.ports import free_port
from tests.process_groups import group_members
from tests.waiting import wait_for

STARTED = re.compile(r"started (\S+) \(pid (\d+)\)")


class UpProcess:
    """One ``kickoff up`` in its own session, its output in a file; every group it started is
    killed by ``cleanup`` whatever the test did."""

    def __init__(self, args: list[str], *, env: dict[str, str], out: Path) -> None:
        self.out = out
        self._fh = out.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "up", *args],
            env=env,
            stdout=self._fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def children(self) -> dict[str, int]:
        """Name -> pid of every child ``up`` said it started."""
        return {m[1]: int(m[2]) for m in STARTED.finditer(self.output())}

    def cleanup(self) -> None:
        for pgid in [self.proc.pid, *self.children().values()]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._fh.close()


def group_alive(pgid: int) -> bool:
    """Whether anything of process group ``pgid`` still runs, waiting up to 10 s for it to go."""
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not group_members(pgid), timeout=10, interval=0.1)
        return False
    return True


@pytest.fixture
def run_up(subprocess_env, db, amqp_vhost, redis_client, tmp_path) -> Iterator:
    """``run_up(*args)``: a ``kickoff up`` on this run's database, Redis prefix and vhost, with a
    Dramatiq namespace of its own (the starts its listeners hand off at shutdown are deleted after)."""
    from models.coordination import connect_redis

    env = {
        **subprocess_env,
        "BROKER_NAMESPACE": f"{subprocess_env['BROKER_NAMESPACE']}-up{uuid.uuid4().hex[:6]}",
    }
    started: list[UpProcess] = []

    def run(*args: str) -> UpProcess:
        up = UpProcess(list(args), env=env, out=tmp_path / f"up-{len(started)}.out")
        started.append(up)
        return up

    yield run
    for up in started:
        up.cleanup()
    if env["BROKER_URL"].startswith("redis"):
        client = connect_redis(env["BROKER_URL"])
        keys = list(client.scan_iter(match=f"{env['BROKER_NAMESPACE']}*", count=1000))
        if keys:
            client.delete(*keys)


def _healthz(port: int) -> int | None:
    """The status /healthz answers on ``port``, or None while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            return answer.status
    except OSError:
        return None


def _running(settings, coordination) -> list:
    from lifecycle.board import listener_board

    return [e for e in listener_board(settings=settings, coordination=coordination) if e.badge == "Running"]


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_kickoff_up_shows_running_listeners_and_sigint_stops_every_child(run_up, settings, coordination):
    api_port, sim_port = free_port(), free_port()
    up = run_up("--port", str(api_port), "--sim-port", str(sim_port), "--games", "2", "--grace", "20")
    wait_for(lambda: "logs in" in up.output() or up.proc.poll() is not None, timeout=60, what="up started")
    children = up.children()
    assert set(children) == {e.name for e in read_procfile()}, up.output()
    assert f"console http://127.0.0.1:{api_port}/ (operator key kk_" in up.output()

    rows = wait_for(
        lambda: _running(settings, coordination), timeout=150, interval=1, what="a Running listener"
    )
    assert rows and up.proc.poll() is None, up.output()[-3000:]
    # The API is not ordered before the listeners: on a loaded machine its imports may still be
    # running when the first listener is (CI saw a refused connection there once).
    with contextlib.suppress(AssertionError):
        wait_for(lambda: _healthz(api_port) == 200 or up.proc.poll() is not None, timeout=90, interval=0.5)
    assert _healthz(api_port) == 200, up.output()[-3000:]
    assert re.search(r"^listener-worker +\| ", up.output(), re.M), "listener worker lines are prefixed"
    wait_for(lambda: re.search(r"^up +\| board: .*Running", up.output(), re.M), timeout=30, what="board line")

    os.kill(up.proc.pid, signal.SIGINT)
    assert up.proc.wait(timeout=150) == 0, up.output()[-3000:]
    assert "stopped" in up.output().splitlines()[-1]
    left = [name for name, pid in children.items() if group_alive(pid)]
    assert left == [], up.output()[-3000:]
    from api.keys import list_keys

    keys = [k for k in list_keys() if k.name.startswith("kickoff up on ")]
    assert len(keys) == 1 and keys[0].revoked_at is not None, "up's operator key is revoked when it stops"


@pytest.mark.e2e
def test_kickoff_up_reports_a_child_that_dies_with_its_last_lines_and_exits_1(run_up):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        up = run_up("--only", "api", "--port", str(port))
        assert up.proc.wait(timeout=90) == 1, up.output()
    out = up.output()
    assert "api exited with code" in out and "its last lines:" in out
    assert re.search(r"^api +\| .*(address already in use|Errno 98)", out, re.M | re.I), out
    assert not group_alive(up.children()["api"])


def test_kickoff_up_refuses_an_unknown_process_naming_the_known_ones():
    done = subprocess.run(
        [sys.executable, "-m", "cli", "up", "--only", "api,nope"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "'nope' is not a process" in done.stderr and "listener-worker" in done.stderr


def test_only_takes_procfile_names_or_a_unique_prefix_and_no_sim_drops_srsim(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text(
        "# processes\nworker: dramatiq actors\nlistener-worker: dramatiq x\n"
        "launcher: kickoff launcher\n\nsrsim: kickoff sim serve\n"
    )
    entries = read_procfile(procfile)
    assert [e.name for e in entries] == ["worker", "listener-worker", "launcher", "srsim"]
    assert [e.name for e in select_entries(entries, only=["listener", "worker"])] == [
        "worker",
        "listener-worker",
    ]
    assert [e.name for e in select_entries(entries, exclude=("srsim",))] == [
        "worker",
        "listener-worker",
        "launcher",
    ]
    with pytest.raises(ValueError, match="'nope' is not a process"):
        select_entries(entries, only=["nope"])
    with pytest.raises(ValueError, match="'l' is ambiguous"):
        select_entries(entries, only=["l"])
    procfile.write_text("worker dramatiq actors\n")
    with pytest.raises(ConfigurationError, match="Procfile:1: not a 'name: command' line"):
        read_procfile(procfile)


def test_a_child_runs_its_procfile_command_through_sh_with_quoted_extra_arguments(tmp_path):
    entry = ProcfileEntry(name="srsim", command="kickoff sim serve")
    argv = child_argv(entry, ["--script", str(tmp_path / "a b.json"), "--register"])
    assert argv == ["/bin/sh", "-c", f"exec kickoff sim serve --script '{tmp_path}/a b.json' --register"]


def test_lines_are_prefixed_by_process_padded_and_coloured_only_on_a_terminal(capsys):
    Printer(["up", "listener-worker"], colour=False).line("up", "started")
    Printer(["up", "listener-worker"], colour=True).line("listener-worker", "ready")
    plain, coloured = capsys.readouterr().out.splitlines()
    assert plain == "up              | started"
    assert coloured.startswith("\x1b[") and "listener-worker |" in coloured and coloured.endswith(" ready")


def test_up_games_start_within_a_minute_and_last_long():
    games = up_games(3)
    assert [g["start_after"] for g in games] == [20.0, 35.0, 50.0]
    assert all(g["is_test"] and g["event_count"] * g["event_interval"] >= 600 for g in games)


def test_a_process_group_stops_the_last_started_first_and_kills_what_ignores_sigterm(tmp_path):
    group = ProcessGroup(os.environ, tmp_path)
    terms = tmp_path / "terms"  # each child appends its name when it gets SIGTERM

    def polite_child(name: str) -> list[str]:
        return [
            "sh",
            "-c",
            f"trap 'echo TERM; echo {name} >> {terms}; exit 0' TERM; echo up; while :; do sleep 0.1; done",
        ]

    polite = group.start("polite", polite_child("polite"))
    middle = group.start("middle", polite_child("middle"))
    stubborn = group.start(
        "stubborn",
        [
            "sh",
            "-c",
            f"trap 'echo stubborn >> {terms}' TERM; sleep 300 & echo up; while :; do sleep 0.1; done",
        ],
    )
    children = (polite, middle, stubborn)
    assert all(child.wait_for_output("up", timeout=30) for child in children)
    try:
        assert group.stop(grace=1) == ["stubborn"]
    finally:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
    assert terms.read_text().split() == ["stubborn", "middle", "polite"]  # the reverse of the start order
    assert polite.proc.returncode == 0 and "TERM" in polite.output()
    assert not group_alive(polite.pid) and not group_alive(stubborn.pid)  # the background sleep too


def test_a_hurried_stop_kills_at_once_instead_of_waiting_out_the_grace(tmp_path):
    group = ProcessGroup(os.environ, tmp_path)
    stubborn = group.start("stubborn", ["sh", "-c", "trap '' TERM; echo up; while :; do sleep 0.1; done"])
    assert stubborn.wait_for_output("up", timeout=30)
    hurry = threading.Event()
    hurry.set()
    try:
        assert group.stop(grace=3600, hurry=hurry) == ["stubborn"]  # a wait of the grace fails the test
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(stubborn.pid, signal.SIGKILL)
    assert not group_alive(stubborn.pid)
