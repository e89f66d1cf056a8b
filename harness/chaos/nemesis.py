"""The chaos harness's hands: listener workers on test hosts (``Fleet``, with a supervisor that
restarts a worker that exited on its own) and the ``Nemesis`` that injects a schedule's faults
into them and records what it actually did (``harness.chaos.checker.FaultRecord``).

A fault is recorded per worker: the slots it hit, each restarted worker's time down (from its
stop until its new worker said "ready for action"), the feed connections a black-holed host gave
up; a fault aimed at a worker that was not running (being restarted by the supervisor or by
another fault) does nothing and is recorded as not injected.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.processes import ChildProcess, dramatiq_worker_argv
from harness.chaos.checker import FaultRecord
from harness.chaos.schedule import PARTITION_SERVICES, Fault

REPO = Path(__file__).resolve().parents[2]
WORKERS_PER_HOST = 2
#: The supervisor starts a worker that exited on its own again this long after it saw it gone.
RESTART_DELAY_SECONDS = 2.0
#: Longest wait for a started worker to say "ready for action".
READY_TIMEOUT_SECONDS = 120.0


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Worker:
    host: int
    slot: int
    gen: int
    proc: ChildProcess
    skew: float

    @property
    def via(self) -> str:
        return f"h{self.host}w{self.slot}g{self.gen}"

    @property
    def name(self) -> str:
        """The slot's name (``h0w1``): ``harness.chaos.checker.slot_of(via)``."""
        return f"h{self.host}w{self.slot}"

    def ready(self) -> float:
        """Wait until the worker is ready for action; when it was seen ready (``time.monotonic()``)."""
        self.proc.wait_for_output("ready for action", timeout=READY_TIMEOUT_SECONDS)
        return time.monotonic()


class Fleet:
    """The listener workers on the test hosts: started, killed, paused, restarted; a supervisor
    thread starts again every worker that exited outside an operation (``exits``: their records)."""

    def __init__(self, hosts: list[Any], env: dict[str, str], logdir: Path) -> None:
        self.hosts, self.env, self.logdir = hosts, env, logdir
        self.workers: dict[tuple[int, int], Worker] = {}
        self.locks = {(h, s): threading.Lock() for h in range(len(hosts)) for s in range(WORKERS_PER_HOST)}
        self.gens = Counter[tuple[int, int]]()
        self.exits: list[FaultRecord] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name="supervisor", daemon=True)

    @property
    def slots(self) -> dict[str, int]:
        """Every worker slot's name and its host."""
        return {f"h{h}w{s}": h for h, s in self.locks}

    @property
    def restarts(self) -> int:
        return len(self.exits)

    def spawn(self, host: int, slot: int, *, skew: float = 0.0) -> Worker:
        gen = self.gens[(host, slot)]
        self.gens[(host, slot)] += 1
        via = f"h{host}w{slot}g{gen}"
        env = {**self.env, "SPORTRADAR_BASE_URL": f"{self.env['SPORTRADAR_BASE_URL']}/_via/{via}"}
        env["DATA_DIR"] = str(self.logdir / f"data-h{host}")  # each host its own disk: no shared file
        env = self.hosts[host].env(env)
        if skew:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(REPO / "bench" / "_skew"), env.get("PYTHONPATH")])
            )
            env["KICKOFF_CLOCK_SKEW_SECONDS"] = f"{skew:g}"
        argv = dramatiq_worker_argv("match_listeners", threads=16)
        proc = self.hosts[host].run(argv, env=env, log=self.logdir / f"{via}.log", cwd=REPO)
        worker = Worker(host, slot, gen, proc, skew)
        self.workers[(host, slot)] = worker
        return worker

    def start_all(self) -> None:
        for host, slot in self.locks:
            self.spawn(host, slot)
        for worker in self.workers.values():
            if not worker.proc.wait_for_output("ready for action", timeout=READY_TIMEOUT_SECONDS):
                raise RuntimeError(f"worker {worker.via} did not start: {worker.proc.log}")
        self._thread.start()

    def _supervise(self) -> None:
        exited: dict[tuple[int, int], float] = {}  # when the supervisor saw a worker gone
        while not self._stop.wait(1.0):
            for key, lock in self.locks.items():
                if not lock.acquire(blocking=False):
                    continue
                try:
                    worker = self.workers[key]
                    if worker.proc.running():
                        exited.pop(key, None)
                        continue
                    seen = exited.setdefault(key, time.monotonic())
                    if time.monotonic() - seen < RESTART_DELAY_SECONDS:
                        continue
                    exited.pop(key)
                    code = worker.proc.proc.returncode
                    worker.proc.reap_group()
                    log(f"  supervisor: {worker.via} exited ({code}); starting it again")
                    new = self.spawn(*key, skew=worker.skew)
                finally:
                    lock.release()
                ready = new.ready()
                record = FaultRecord(
                    "exited", seen, ready, worker.host, (worker.name,), down=((worker.name, seen, ready),)
                )
                self.exits.append(record)

    def kill(self, host: int, slot: int, restart_after: float) -> tuple[float, float] | None:
        """SIGKILL the slot's worker, start it again ``restart_after`` later: (killed, ready), or
        None when it was not running (nothing done)."""
        with self.locks[(host, slot)]:
            worker = self.workers[(host, slot)]
            if not worker.proc.running():
                return None
            killed = time.monotonic()
            worker.proc.kill(timeout=30)
            time.sleep(restart_after)
            new = self.spawn(host, slot, skew=worker.skew)
        return killed, new.ready()

    def restart(self, host: int, slot: int, *, skew: float | None = None) -> tuple[float, float] | None:
        """Graceful restart (SIGTERM: the hand-off), the new one with ``skew`` (None: as before):
        (stopped, ready), or None when it was not running (nothing done)."""
        with self.locks[(host, slot)]:
            worker = self.workers[(host, slot)]
            if not worker.proc.running():
                return None
            stopped = time.monotonic()
            try:
                worker.proc.terminate(timeout=90)
            except subprocess.TimeoutExpired:
                log(f"  {worker.via} still running 90 s after SIGTERM: killed")
                worker.proc.kill(timeout=30)
            worker.proc.reap_group()
            new = self.spawn(host, slot, skew=worker.skew if skew is None else skew)
        return stopped, new.ready()

    def pause(self, host: int, slot: int) -> Worker | None:
        """SIGSTOP the slot's worker (its whole process group): the worker, or None when it was
        not running (nothing done)."""
        with self.locks[(host, slot)]:
            worker = self.workers[(host, slot)]
            if not worker.proc.running():
                return None
            worker.proc.signal_group(signal.SIGSTOP)
            return worker

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        for worker in self.workers.values():
            with contextlib.suppress(Exception):
                worker.proc.signal_group(signal.SIGCONT)
                worker.proc.close()


class Nemesis:
    """Runs the schedule's faults, each in its own thread at its time; records what it did."""

    def __init__(self, fleet: Fleet, hosts: list[Any], redis: Any) -> None:
        self.fleet, self.hosts, self.redis = fleet, hosts, redis
        self.records: list[FaultRecord] = []
        self.errors: list[str] = []
        self._cuts: Counter[tuple[int, str]] = Counter()
        self._mu = threading.Lock()
        self._redis_lock = threading.Lock()

    def run(self, faults: list[Fault], t0: float) -> None:
        threads = []
        for fault in faults:
            delay = t0 + fault.at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            thread = threading.Thread(target=self._one, args=(fault,), name=fault.kind, daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join(300)

    def _one(self, fault: Fault) -> None:
        started = time.monotonic()
        record = FaultRecord(fault.kind, started, started, fault.host, injected=False)
        try:
            log(f"  fault {fault.describe()}")
            record = self._inject(fault, started)
        except Exception as exc:  # a fault that could not be made is reported, not a crash
            self.errors.append(f"{fault.describe().strip()}: {exc!r}")
            log(f"  fault failed: {fault.describe().strip()}: {exc!r}")
        if not record.injected:
            log(f"  not injected (its target was not running): {fault.describe().strip()}")
        with self._mu:
            self.records.append(record)

    def _inject(self, fault: Fault, started: float) -> FaultRecord:
        host, worker = fault.host, fault.worker
        slot = None if host is None or worker is None else f"h{host}w{worker}"
        if fault.kind == "kill":
            assert host is not None and worker is not None and slot is not None
            done = self.fleet.kill(host, worker, fault.seconds)
            if done is None:
                return FaultRecord("kill", started, started, host, (slot,), injected=False)
            return FaultRecord("kill", done[0], done[1], host, (slot,), down=((slot, *done),))
        if fault.kind == "pause":
            assert host is not None and worker is not None and slot is not None
            paused = self.fleet.pause(host, worker)
            if paused is None:
                return FaultRecord("pause", started, started, host, (slot,), injected=False)
            stopped = time.monotonic()
            time.sleep(fault.seconds)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(paused.proc.pid, signal.SIGCONT)
            return FaultRecord("pause", stopped, time.monotonic(), host, (slot,), frozen=(paused.via,))
        if fault.kind in PARTITION_SERVICES:
            assert host is not None and fault.mode is not None
            services = PARTITION_SERVICES[fault.kind]
            log_mark = len(self.hosts[host].given_up_log)
            self._cut(host, services, fault.mode)
            cut = time.monotonic()
            time.sleep(fault.seconds)
            self._heal(host, services)
            healed = time.monotonic()
            blackholed = fault.mode == "blackhole" and "feed" in services
            # From the log, not the set: a reused port given up in an earlier black hole counts again.
            given = self.hosts[host].given_up_log[log_mark:]
            gave_up = tuple(sorted({port for service, port in given if service == "feed"}))
            return FaultRecord(
                fault.kind,
                cut,
                healed,
                host,
                feed_blackholed=blackholed,
                gave_up=gave_up if blackholed else (),
            )
        if fault.kind == "redis-restart":
            with self._redis_lock:
                down = time.monotonic()
                self.redis.restart(down_seconds=fault.seconds)
            return FaultRecord("redis-restart", down, time.monotonic())
        if fault.kind == "clock-skew":
            assert host is not None and worker is not None and slot is not None
            first = self.fleet.restart(host, worker, skew=fault.skew_seconds)
            if first is None:
                return FaultRecord("clock-skew", started, started, host, (slot,), injected=False)
            time.sleep(fault.seconds)
            back = self.fleet.restart(host, worker, skew=0.0)
            down = ((slot, *first),) + (((slot, *back),) if back is not None else ())
            return FaultRecord("clock-skew", first[0], down[-1][2], host, (slot,), down=down)
        if fault.kind == "deploy":
            assert host is not None
            done: dict[str, tuple[float, float] | None] = {}

            def restart(one: int) -> None:
                done[f"h{host}w{one}"] = self.fleet.restart(host, one)

            restarts = [threading.Thread(target=restart, args=(one,)) for one in range(WORKERS_PER_HOST)]
            for thread in restarts:
                thread.start()
            for thread in restarts:
                thread.join(200)
            spans = tuple((name, *span) for name, span in sorted(done.items()) if span is not None)
            if not spans:
                return FaultRecord("deploy", started, started, host, injected=False)
            return FaultRecord(
                "deploy",
                min(s[1] for s in spans),
                max(s[2] for s in spans),
                host,
                tuple(s[0] for s in spans),
                down=spans,
            )
        raise ValueError(f"unknown fault kind {fault.kind!r}")

    def _cut(self, host: int, services: tuple[str, ...], mode: str) -> None:
        with self._mu:
            for service in services:
                self._cuts[(host, service)] += 1
            self.hosts[host].cut(list(services), kind=mode)

    def _heal(self, host: int, services: tuple[str, ...]) -> None:
        with self._mu:
            healed = []
            for service in services:
                self._cuts[(host, service)] -= 1
                if self._cuts[(host, service)] == 0:
                    healed.append(service)
            if healed:
                self.hosts[host].heal(healed)
