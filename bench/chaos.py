"""Benchmark: a seeded nemesis over listener workers on test hosts; the history checked at the end.

Run (root: network namespaces): ``.venv/bin/python bench/chaos.py --minutes M --seed S [--hosts 3]
[--json]``. About M + 2 minutes. What runs:

* srsim (``kickoff sim serve --no-db``) with 30 mlb games at 2 events/s, each lasting the run and
  a tail after it (``TAIL_SECONDS`` beyond the default takeover bound, so recovery after the last
  heal is seen; recovery is judged up to each game's end), with corrections and deletes;
* on the host side: a private Redis (REDIS_URL: locks, leases; the one ``redis-restart``
  restarts empty; tests/private_redis.py), the shared PostgreSQL (a throw-away database), the
  shared Redis as the broker (a throw-away namespace), the scheduler and a default worker;
* ``--hosts`` test hosts (tests/hosts.py: a network namespace each, reaching every service
  through its own fault proxies), each running 2 listener workers (``dramatiq``, the real
  MatchListener, default lease and hand-off settings, heartbeat 5 s). A worker that exits is
  started again a second later, as a supervisor would.

Once every match streams, a nemesis thread injects the faults of ``bench/_chaos_schedule.plan``
(printed, and in the JSON): ``kill`` (SIGKILL a worker's process group; restarted after the
fault's delay), ``pause`` (SIGSTOP past every lease, then SIGCONT), ``partition-redis``,
``partition-postgres``, ``partition-feed``, ``partition-all`` (the host cut from the service(s)
by iptables in its namespace: a black hole or refused connects), ``redis-restart`` (the private
Redis killed and started empty), ``clock-skew`` (the worker restarted gracefully with its clock,
``config.clock.utcnow``, off by minutes - bench/_skew/sitecustomize.py - and back after the
fault), ``deploy`` (a graceful restart, SIGTERM, of both workers of a host: the hand-off of
actors/draining.py). Each host has its own DATA_DIR. Faults overlap. A recorder polls every
lifecycle row and each match's event log (its newest row's fencing token) each half second;
srsim logs every stream connection with the worker that made it (``/_via/{tag}``).
At the end bench/_chaos_history.check judges the history (see there); ``--json`` prints one
object ``{"ok", "seed", "faults", "violations", "events_missing", "max_takeover_seconds",
"max_unstreamed_seconds", ...}``. Exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._chaos_history import (  # noqa: E402
    ArchiveResult,
    ArchiveSample,
    Connection,
    FaultRecord,
    History,
    RowState,
    check,
)
from bench._chaos_schedule import PARTITION_SERVICES, Fault, counts, plan  # noqa: E402
from cli.processes import ChildProcess, dramatiq_worker_argv  # noqa: E402

ADMIN_DB = "postgresql://postgres@127.0.0.1:5432"
SHARED_REDIS = "redis://127.0.0.1:6379"
MATCHES = 30
WORKERS_PER_HOST = 2
EVENT_INTERVAL = 0.5
#: Seconds the games run before the schedule may begin (workers booted, every match streaming).
WARMUP_SECONDS = 20.0
#: Seconds the games run after the schedule's end beyond the takeover bound.
TAIL_SECONDS = 10.0
#: Takeover bound after a fault or a heal: a worker lease (8 s) and its reaper poll, the longest
#: reconnect backoff step a cut of up to 30 s reaches (16 s), and a few seconds of start.
DEFAULT_BOUND_SECONDS = 30.0
POLL_SECONDS = 0.5
#: The supervisor starts a worker that exited on its own again this long after it saw it gone.
RESTART_DELAY_SECONDS = 2.0
_VIA = re.compile(r"^h(?P<host>\d+)w(?P<slot>\d+)g(?P<gen>\d+)$")
WORKER_ENV = {
    "APP_ENV": "staging",  # the scheduler dispatches live matches and sweeps every minute
    "LISTENER_BODY": "listener.match_listener:MatchListener",
    "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "5",
    "LISTENER_HEARTBEAT_STALE_SECONDS": "180",
    "LISTENER_STATUS_RELOAD_HEARTBEATS": "3",
    "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": "120",
}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _epoch(value: Any) -> float | None:
    return None if value is None else float(value)


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


class Fleet:
    """The listener workers on the test hosts: started, killed, paused, restarted; a supervisor
    thread starts again every worker that exited outside an operation."""

    def __init__(self, hosts: list[Any], env: dict[str, str], logdir: Path) -> None:
        self.hosts, self.env, self.logdir = hosts, env, logdir
        self.workers: dict[tuple[int, int], Worker] = {}
        self.locks = {(h, s): threading.Lock() for h in range(len(hosts)) for s in range(WORKERS_PER_HOST)}
        self.gens = Counter[tuple[int, int]]()
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name="supervisor", daemon=True)

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
            if not worker.proc.wait_for_output("ready for action", timeout=120):
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
                    elif time.monotonic() - exited.setdefault(key, time.monotonic()) >= RESTART_DELAY_SECONDS:
                        exited.pop(key)
                        code = worker.proc.proc.returncode
                        worker.proc.reap_group()
                        log(f"  supervisor: {worker.via} exited ({code}); starting it again")
                        self.restarts += 1
                        self.spawn(*key, skew=worker.skew)
                finally:
                    lock.release()

    def kill(self, host: int, slot: int, restart_after: float) -> str:
        with self.locks[(host, slot)]:
            worker = self.workers[(host, slot)]
            worker.proc.kill(timeout=30)
            time.sleep(restart_after)
            self.spawn(host, slot, skew=worker.skew)
            return worker.via

    def restart(self, host: int, slot: int, *, skew: float | None = None) -> str:
        """Graceful restart (SIGTERM: the hand-off), the new one with ``skew`` (None: as before)."""
        with self.locks[(host, slot)]:
            worker = self.workers[(host, slot)]
            try:
                worker.proc.terminate(timeout=90)
            except subprocess.TimeoutExpired:
                log(f"  {worker.via} still running 90 s after SIGTERM: killed")
                worker.proc.kill(timeout=30)
            worker.proc.reap_group()
            self.spawn(host, slot, skew=worker.skew if skew is None else skew)
            return worker.via

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
        frozen: tuple[str, ...] = ()
        try:
            log(f"  fault {fault.describe()}")
            if fault.kind == "kill":
                assert fault.host is not None and fault.worker is not None
                self.fleet.kill(fault.host, fault.worker, fault.seconds)
            elif fault.kind == "pause":
                assert fault.host is not None and fault.worker is not None
                worker = self.fleet.workers[(fault.host, fault.worker)]
                frozen = (worker.via,)
                worker.proc.signal_group(signal.SIGSTOP)
                time.sleep(fault.seconds)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.proc.pid, signal.SIGCONT)
            elif fault.kind in PARTITION_SERVICES:
                assert fault.host is not None and fault.mode is not None
                self._cut(fault.host, PARTITION_SERVICES[fault.kind], fault.mode)
                time.sleep(fault.seconds)
                self._heal(fault.host, PARTITION_SERVICES[fault.kind])
            elif fault.kind == "redis-restart":
                with self._redis_lock:
                    self.redis.restart(down_seconds=fault.seconds)
            elif fault.kind == "clock-skew":
                assert fault.host is not None and fault.worker is not None
                self.fleet.restart(fault.host, fault.worker, skew=fault.skew_seconds)
                time.sleep(fault.seconds)
                self.fleet.restart(fault.host, fault.worker, skew=0.0)
            elif fault.kind == "deploy":
                assert fault.host is not None
                restarts = [
                    threading.Thread(target=self.fleet.restart, args=(fault.host, slot))
                    for slot in range(WORKERS_PER_HOST)
                ]
                for thread in restarts:
                    thread.start()
                for thread in restarts:
                    thread.join(200)
        except Exception as exc:  # a fault that could not be made is reported, not a crash
            self.errors.append(f"{fault.describe().strip()}: {exc!r}")
            log(f"  fault failed: {fault.describe().strip()}: {exc!r}")
        # A kill is instantaneous: the supervisor's restart heals no stream (the takeover does).
        healed = started if fault.kind == "kill" else time.monotonic()
        blackholed = fault.mode == "blackhole" and "feed" in PARTITION_SERVICES.get(fault.kind, ())
        with self._mu:
            self.records.append(
                FaultRecord(
                    fault.kind, started, healed, fault.host, frozen=frozen, feed_blackholed=blackholed
                )
            )

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


class Recorder:
    """Polls every lifecycle row of the run's matches and each one's event log (newest token, rows)."""

    def __init__(self, matches: dict[str, str], data_dir: Path) -> None:
        self.matches = matches  # match id -> sr_id
        self.rows: list[RowState] = []
        self.samples: list[ArchiveSample] = []
        self._last_row: dict[str, tuple] = {}
        self._last_sample: dict[str, tuple] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="recorder", daemon=True)

    def start(self) -> Recorder:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling, then poll once more (the last states)."""
        self.halt()
        self.poll()

    def halt(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.poll()
            except Exception as exc:  # the history's own database poll: report and go on
                log(f"  recorder: {exc!r}")

    def poll(self) -> None:
        from models.db import database

        now = time.monotonic()
        try:
            rows = database.execute_sql(
                "SELECT r.id::text, m.sr_id, extract(epoch FROM r.created_at), "
                "extract(epoch FROM r.heartbeat_at), extract(epoch FROM r.ended_at), r.fence_token, "
                "r.exit_code FROM match_listener_records r JOIN matches m ON m.id = r.match_id "
                "WHERE r.match_id = ANY(%s::uuid[])",
                (list(self.matches),),
            ).fetchall()
        finally:
            database.close()
        for row_id, sr_id, created, beat, ended, token, code in rows:
            key = (created, beat, ended, token, code)
            if self._last_row.get(row_id) != key:
                self._last_row[row_id] = key
                self.rows.append(
                    RowState(row_id, sr_id, float(created), _epoch(beat), _epoch(ended), token, code, now)
                )
        # Each match's event log: its newest row's fencing token (a stale run's row after a newer
        # run's is a token going down) and its row count.
        try:
            logged = database.execute_sql(
                "SELECT DISTINCT ON (e.match_id) m.sr_id, e.fence_token, "
                "(SELECT count(*) FROM match_events c WHERE c.match_id = e.match_id) "
                "FROM match_events e JOIN matches m ON m.id = e.match_id "
                "WHERE e.match_id = ANY(%s::uuid[]) ORDER BY e.match_id, e.seq DESC",
                (list(self.matches),),
            ).fetchall()
        finally:
            database.close()
        for sr_id, token, size in logged:
            if self._last_sample.get(sr_id) != (token, size):
                self._last_sample[sr_id] = (token, size)
                self.samples.append(ArchiveSample(sr_id, now, token, size))

    def open_rows(self) -> set[str]:
        return {r for r, (_, _, ended, _, _) in self._last_row.items() if ended is None}


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def start_srsim(script: Path, port: int, logdir: Path) -> ChildProcess:
    kickoff = str(Path(sys.executable).with_name("kickoff"))
    argv = [kickoff, "sim", "serve", "--no-db", "--port", str(port), "--script", str(script)]
    child = ChildProcess([*argv, "--heartbeat-seconds", "1"], env=os.environ, log=logdir / "srsim.log")
    if not child.wait_for_output("listening on", timeout=60):
        child.close()
        raise RuntimeError(f"srsim did not start: {logdir / 'srsim.log'}")
    return child


def write_script(path: Path, sr_ids: list[str], seconds: float) -> None:
    games = [
        {
            "sr_id": sr_id,
            "league": "mlb",
            "is_test": False,
            "start_after": 2.0 + k * 0.05,
            "event_interval": EVENT_INTERVAL,
            "event_count": int(seconds / EVENT_INTERVAL),
            "corrections": 3,
            "deletes": 2,
        }
        for k, sr_id in enumerate(sr_ids)
    ]
    path.write_text(json.dumps({"games": games}))


def create_matches(sr_ids: list[str]) -> dict[str, str]:
    from config.clock import utcnow
    from models.db import database
    from models.league import League
    from models.match import Match

    league, _ = League.get_or_create(name="mlb")
    out = {}
    for sr_id in sr_ids:
        match = Match.create(league=league, sr_id=sr_id, status="inprogress", scheduled=utcnow())
        out[str(match.id)] = sr_id
    database.close()
    return out


def archive_results(recorder: Recorder, url: str) -> list[ArchiveResult]:
    from listener.events import message_key
    from listener.play_by_play import PlayByPlay
    from listener.verify import compare
    from models.event_log import messages_of

    out = []
    for match_id, sr_id in recorder.matches.items():
        pbp = _get(f"{url}/mlb/trial/games/{sr_id}/pbp.json")
        messages = messages_of(match_id)
        verdict = compare(messages, PlayByPlay(game=pbp["game"], events=pbp["events"]))
        keys = Counter(k for m in messages if (k := message_key(m)) is not None)
        out.append(
            ArchiveResult(
                sr_id,
                events=verdict.events,
                missing=verdict.missing,
                extra=verdict.extra,
                differing=verdict.differing,
                duplicates=[str(k) for k, n in keys.items() if n > 1],
            )
        )
    return out


def connections(url: str) -> list[Connection]:
    out = []
    for c in _get(f"{url}/_srsim/connections")["connections"]:
        found = _VIA.match(c["via"] or "")
        host = int(found["host"]) if found else None
        out.append(Connection(c["sr_id"], c["via"], host, c["opened"], c["closed"]))
    return out


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(0.5)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from models.coordination import connect_redis
    from models.db import init_database
    from models.migrate import drop_database, migrate
    from tests.faultproxy import stable_port
    from tests.hosts import HostNetwork
    from tests.private_redis import PrivateRedis

    tag = uuid.uuid4().hex[:8]
    logdir = Path(f"/tmp/kickoff-bench-chaos-{tag}")
    logdir.mkdir(parents=True)
    faults = plan(args.seed, minutes=args.minutes, hosts=args.hosts, workers_per_host=WORKERS_PER_HOST)
    log(
        f"seed {args.seed}, {args.minutes:g} min, {args.hosts} hosts x {WORKERS_PER_HOST} workers, "
        f"{MATCHES} matches, bound {args.bound:g} s; logs in {logdir}; schedule:"
    )
    for fault in faults:
        log(f"  {fault.describe()}")
    db_url = f"{ADMIN_DB}/kickoff_bench_chaos_{tag}"
    redis = PrivateRedis(logdir / "redis").start()
    srsim_port = stable_port()
    url = f"http://127.0.0.1:{srsim_port}"
    env = {
        **os.environ,
        **WORKER_ENV,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis.url(),
        "REDIS_KEY_PREFIX": f"kickoffchaos:{tag}:",
        "BROKER_URL": f"{SHARED_REDIS}/2",
        "BROKER_NAMESPACE": f"kickoffchaos-{tag}",
        "SPORTRADAR_BASE_URL": url,
        "DATA_DIR": str(logdir / "data"),
    }
    env.pop("AMQP_URL", None)
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "REDIS_KEY_PREFIX", "DATA_DIR")})
    migrate(db_url)
    init_database(db_url)
    network = HostNetwork()
    host_side: list[ChildProcess] = []
    fleet = recorder = srsim = None
    try:
        hosts = [network.add_host(f"h{n}") for n in range(args.hosts)]
        sr_ids = [f"sr:match:{uuid.uuid4()}" for _ in range(MATCHES)]
        matches = create_matches(sr_ids)
        fleet = Fleet(hosts, env, logdir)
        bin_dir = Path(sys.executable).parent
        default = ChildProcess(dramatiq_worker_argv("default"), env=env, log=logdir / "default.log", cwd=REPO)
        host_side.append(default)
        fleet.start_all()
        if not default.wait_for_output("ready for action", timeout=120):
            raise RuntimeError("the default worker did not start")
        host_side.append(
            ChildProcess([str(bin_dir / "kickoff"), "scheduler"], env=env, log=logdir / "sched.log")
        )
        game_seconds = WARMUP_SECONDS + args.minutes * 60 + DEFAULT_BOUND_SECONDS + TAIL_SECONDS
        write_script(logdir / "games.json", sr_ids, game_seconds)
        srsim = start_srsim(logdir / "games.json", srsim_port, logdir)
        recorder = Recorder(matches, logdir / "data").start()
        subprocess.run(
            [str(bin_dir / "kickoff"), "listeners", "dispatch"],
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )

        def all_streaming() -> bool:
            open_now = {c.sr_id for c in connections(url) if c.closed is None}
            return open_now >= set(sr_ids)

        wait_until(all_streaming, 60, "every match streaming")
        t0 = time.monotonic()
        log(f"every match streams; the nemesis starts ({time.strftime('%H:%M:%S')})")
        nemesis = Nemesis(fleet, hosts, redis)
        nemesis.run(faults, t0)
        log(f"schedule done ({len(nemesis.records)} faults); waiting for the games' end")
        sessions = {}

        def games_over() -> bool:
            nonlocal sessions
            sessions = {s["sr_id"]: s for s in _get(f"{url}/_srsim/sessions")["sessions"]}
            return all(s["position"] >= s["events"] for s in sessions.values())

        game_ends: dict[str, float] = {}

        def note_ends() -> bool:
            over = games_over()
            for sr_id, s in sessions.items():
                if s["position"] >= s["events"]:
                    game_ends.setdefault(sr_id, time.monotonic())
            return over

        wait_until(note_ends, game_seconds + 120, "every game over")
        wait_until(lambda: not recorder.open_rows(), 90, "every listener run closed after its game")
        recorder.stop()
        history = History(
            started=t0,
            game_ends=game_ends,
            connections=connections(url),
            rows=recorder.rows,
            archive_samples=recorder.samples,
            archives=archive_results(recorder, url),
            faults=nemesis.records,
            hosts=args.hosts,
        )
        verdict = check(history, bound_seconds=args.bound)
        violations = verdict.violations + [
            {"kind": "fault-not-injected", "detail": e} for e in nemesis.errors
        ]
        (logdir / "history.json").write_text(json.dumps(history, default=lambda o: o.__dict__))
        return {
            "ok": not violations,
            "seed": args.seed,
            "faults": counts(faults),
            "violations": violations,
            "events_missing": verdict.events_missing,
            "max_takeover_seconds": verdict.max_takeover_seconds,
            "max_unstreamed_seconds": verdict.max_unstreamed_seconds,
            "max_takeover_by_fault": verdict.max_takeover_by_fault,
            "minutes": args.minutes,
            "hosts": args.hosts,
            "bound_seconds": args.bound,
            "worker_restarts_by_supervisor": fleet.restarts,
            "schedule": [f.as_dict() for f in faults],
            "logs": str(logdir),
        }
    finally:
        if recorder is not None:
            recorder.halt()
        if fleet is not None:
            fleet.stop()
        for child in host_side:
            with contextlib.suppress(Exception):
                child.kill(timeout=30)
                child.close()
        if srsim is not None:
            srsim.close()
        network.close()
        redis.stop()
        from models.db import database

        database.close()
        drop_database(db_url)
        broker = connect_redis(f"{SHARED_REDIS}/2")
        for key in broker.scan_iter(match=f"*kickoffchaos-{tag}*", count=5000):
            broker.delete(key)
        if not args.keep_logs:
            shutil.rmtree(logdir / "data", ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="length of the fault schedule")
    parser.add_argument("--seed", type=int, default=26, help="the schedule's seed (same seed, same faults)")
    parser.add_argument("--hosts", type=int, default=3, help="test hosts, 2 listener workers each")
    parser.add_argument("--bound", type=float, default=DEFAULT_BOUND_SECONDS, help="takeover bound (s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (the rest goes to stderr)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the archives beside the logs")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        for violation in result["violations"]:
            print(f"violation: {json.dumps(violation)}")
        print(
            f"seed {result['seed']}: {'ok' if result['ok'] else 'VIOLATIONS'}; faults "
            + ", ".join(f"{k} {n}" for k, n in result["faults"].items())
            + f"; events missing {result['events_missing']};"
            f" worst takeover {result['max_takeover_seconds']} s;"
            f" longest without a stream {result['max_unstreamed_seconds']} s"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
