"""Benchmark: a seeded nemesis over listener workers on test hosts; the history checked at the end.

Run (root: network namespaces): ``.venv/bin/python bench/chaos.py --minutes M --seed S [--hosts 3]
[--json]``. About M + 2 minutes. What runs:

* srsim (``kickoff sim serve --no-db``) with 30 mlb games at 2 events/s, each lasting the run and
  a tail after it (``TAIL_SECONDS`` beyond the default takeover bound, so recovery after the last
  heal is seen; recovery is judged up to each game's end), with corrections and deletes;
* on the host side: a private Redis (REDIS_URL: locks, leases; the one ``redis-restart``
  restarts empty; harness/private_redis.py), the shared PostgreSQL (a throw-away database), the
  shared Redis as the broker (a throw-away namespace), the scheduler and a default worker;
* ``--hosts`` test hosts (harness/hosts.py: a network namespace each, reaching every service
  through its own fault proxies), each running 2 listener workers (``dramatiq``, the real
  MatchListener, default lease and hand-off settings, heartbeat 5 s). A worker that exits is
  started again a second later, as a supervisor would.

Once every match streams, a nemesis thread injects the faults of ``harness/chaos/schedule.plan``
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
At the end harness/chaos/checker.check judges the history (see there); ``--json`` prints one
object ``{"ok", "seed", "faults", "violations", "events_missing", "max_takeover_seconds",
"max_unstreamed_seconds", "max_kill_takeover_seconds", ...}``. Exit 1 on any violation. The first
recovery violations (``slow-recovery``, ``not-recovered``) carry the match's ``story``: srsim's
connections of the match and its lines of every worker log around the stretch without a stream
(harness/chaos/story.py), so a CI run, which keeps no log, still says why.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cli.processes import ChildProcess, dramatiq_worker_argv  # noqa: E402
from harness.chaos.checker import ArchiveResult, Connection, History, check, injected_counts  # noqa: E402
from harness.chaos.nemesis import WORKERS_PER_HOST, Fleet, Nemesis, log  # noqa: E402
from harness.chaos.recorder import Recorder  # noqa: E402
from harness.chaos.schedule import FAULT_KINDS, Fault, counts, plan  # noqa: E402
from harness.chaos.schedule import load as load_schedule  # noqa: E402
from harness.chaos.story import story  # noqa: E402
from harness.faultproxy import stable_port  # noqa: E402
from harness.hosts import HostNetwork  # noqa: E402
from harness.private_redis import PrivateRedis  # noqa: E402

ADMIN_DB = "postgresql://postgres@127.0.0.1:5432"
SHARED_REDIS = "redis://127.0.0.1:6379"
MATCHES = 30
EVENT_INTERVAL = 0.5
#: Seconds the games run before the schedule may begin (workers booted, every match streaming).
WARMUP_SECONDS = 20.0
#: Seconds the games run after the schedule's end beyond twice the takeover bound (a fault healing
#: at the schedule's end, then a takeover as long as the bound, then the bound to see it by).
TAIL_SECONDS = 10.0
#: Takeover bound after a fault or a heal: a worker lease (8 s) and its reaper poll, the longest
#: reconnect backoff step a cut of up to 30 s reaches (16 s), and a few seconds of start.
DEFAULT_BOUND_SECONDS = 30.0
#: Violations whose report carries the match's story (harness/chaos/story.py), and how many do:
#: a CI run keeps no log, so the report is all there is to say why a recovery was slow.
RECOVERY_KINDS = frozenset({"slow-recovery", "not-recovered"})
MAX_STORIES = 3
_VIA = re.compile(r"^h(?P<host>\d+)w(?P<slot>\d+)g(?P<gen>\d+)$")
WORKER_ENV = {
    "APP_ENV": "staging",  # the scheduler dispatches live matches and sweeps every minute
    "LISTENER_BODY": "listener.match_listener:MatchListener",
    "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "5",
    "LISTENER_HEARTBEAT_STALE_SECONDS": "180",
    "LISTENER_STATUS_RELOAD_HEARTBEATS": "3",
    "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": "120",
}


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


T = TypeVar("T")

#: A read of the event log at the end that PostgreSQL refuses is tried this often, this far apart:
#: the suite's PostgreSQL is shared, and a moment at its connection limit ("too many clients")
#: must not end a run that took ten minutes without its verdict.
READ_TRIES = 10
READ_RETRY_SECONDS = 2.0


def _retried(read: Callable[[], T]) -> T:
    from config.errors import DatabaseUnavailable

    for attempt in range(1, READ_TRIES + 1):
        try:
            return read()
        except DatabaseUnavailable as exc:
            if attempt == READ_TRIES:
                raise
            log(f"  reading the event log failed (try {attempt} of {READ_TRIES}): {exc}")
            time.sleep(READ_RETRY_SECONDS)
    raise AssertionError("unreachable")


def archive_results(recorder: Recorder, url: str) -> list[ArchiveResult]:
    from listener.events import message_key
    from listener.play_by_play import PlayByPlay
    from listener.verify import compare
    from models.event_log import messages_of

    out = []
    for match_id, sr_id in recorder.matches.items():
        pbp = _get(f"{url}/mlb/trial/games/{sr_id}/pbp.json")
        messages = _retried(lambda m=match_id: messages_of(m))
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
        out.append(
            Connection(
                c["sr_id"],
                c["via"],
                host,
                c["opened"],
                c["closed"],
                c["first_live"],
                c["last_live"],
                c.get("port"),
            )
        )
    return out


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(0.5)


def _timed_out(condition: Any, timeout: float, what: str) -> list[RuntimeError]:
    """``[]`` once ``condition`` holds, or the one wait_until error when it did not in time."""
    try:
        wait_until(condition, timeout, what)
    except RuntimeError as exc:
        return [exc]
    return []


def run(args: argparse.Namespace, faults: list[Fault]) -> dict[str, Any]:
    from models.coordination import connect_redis
    from models.db import init_database
    from models.migrate import drop_database, migrate

    tag = uuid.uuid4().hex[:8]
    logdir = Path(f"/tmp/kickoff-bench-chaos-{tag}")
    logdir.mkdir(parents=True)
    source = f"schedule {args.schedule}" if args.schedule is not None else f"seed {args.seed}"
    log(
        f"{source}, {args.minutes:g} min, {args.hosts} hosts x {WORKERS_PER_HOST} workers, "
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
        game_seconds = WARMUP_SECONDS + args.minutes * 60 + 2 * args.bound + TAIL_SECONDS
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
        t0, wall_t0 = time.monotonic(), time.time()
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

        # A game that never ends or a run that never closes is a finding of the run, judged beside
        # the others (the history so far is still checked), not an exception that loses them.
        late = [
            {"kind": kind, "detail": str(exc)}
            for kind, condition, timeout, what in (
                ("game-not-over", note_ends, game_seconds + 120, "every game over"),
                ("run-not-closed", lambda: not recorder.open_rows(), 90, "every run closed after its game"),
            )
            for exc in _timed_out(condition, timeout, what)
        ]
        recorder.stop()
        history = History(
            started=t0,
            game_ends=game_ends,
            connections=connections(url),
            rows=recorder.rows,
            archive_samples=recorder.samples,
            archives=archive_results(recorder, url),
            faults=nemesis.records + fleet.exits,
            workers=fleet.slots,
            polls=recorder.polls,
            lost_polls=recorder.lost_polls,
        )
        verdict = check(history, bound_seconds=args.bound, kill_bound_seconds=args.kill_bound)
        match_of = {sr_id: match_id for match_id, sr_id in matches.items()}
        for violation in [v for v in verdict.violations if v["kind"] in RECOVERY_KINDS][:MAX_STORIES]:
            violation["story"] = story(
                violation,
                match_id=match_of[violation["sr_id"]],
                connections=history.connections,
                logdir=logdir,
                t0=t0,
                wall_t0=wall_t0,
            )
        violations = (
            verdict.violations + late + [{"kind": "fault-not-injected", "detail": e} for e in nemesis.errors]
        )
        (logdir / "history.json").write_text(json.dumps(history, default=lambda o: o.__dict__))
        return {
            "ok": not violations,
            "seed": None if args.schedule is not None else args.seed,
            "schedule_file": None if args.schedule is None else str(args.schedule),
            "faults": injected_counts(nemesis.records, FAULT_KINDS),
            "faults_planned": counts(faults),
            "violations": violations,
            "events_missing": verdict.events_missing,
            "max_takeover_seconds": verdict.max_takeover_seconds,
            "max_unstreamed_seconds": verdict.max_unstreamed_seconds,
            "max_takeover_by_fault": verdict.max_takeover_by_fault,
            # Issue 37: from each kill to each of its worker's matches streaming again (under 3 s for a
            # death alone; a compound one, with a Redis restart or a fault of the successor's host on
            # meanwhile, is judged by the bound: checker.kill_takeovers).
            "kill_takeovers": len(verdict.kill_takeovers),
            "max_kill_takeover_seconds": max(verdict.kill_takeovers, default=None),
            "kill_takeovers_alone": len(verdict.kill_takeovers_alone),
            "max_kill_takeover_alone_seconds": max(verdict.kill_takeovers_alone, default=None),
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
    parser.add_argument(
        "--kill-bound",
        type=float,
        default=3.0,
        help="bound from a kill to each of its worker's matches streaming again, for a death alone (s;"
        " issue 37: 3); a kill with a Redis restart or a fault of the successor's host on meanwhile is"
        " judged by --bound",
    )
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=FAULT_KINDS,
        help="leave this kind of fault out of the schedule (repeatable)",
    )
    parser.add_argument(
        "--schedule",
        type=Path,
        help="run these faults instead of the seed's: a JSON list, as a run's --json prints its"
        ' "schedule" (e.g. bench/schedules/deploy-during-feed-cut.json); --minutes still sets the'
        " games' length, so it must cover the last fault",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (the rest goes to stderr)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the archives beside the logs")
    args = parser.parse_args()
    if args.schedule is not None:
        try:
            faults = load_schedule(args.schedule, hosts=args.hosts, workers_per_host=WORKERS_PER_HOST)
        except ValueError as exc:
            parser.error(str(exc))
        last = max((f.heals_at for f in faults), default=0.0)
        if last > args.minutes * 60:
            parser.error(
                f"{args.schedule}: its last fault heals at {last:g} s, after --minutes {args.minutes:g}"
            )
    else:
        faults = plan(
            args.seed,
            minutes=args.minutes,
            hosts=args.hosts,
            workers_per_host=WORKERS_PER_HOST,
            kinds=tuple(k for k in FAULT_KINDS if k not in args.without),
        )
    faulthandler.enable()  # a crash of this process leaves its traceback on stderr, not only an exit code
    result = run(args, faults)
    if args.json:
        print(json.dumps(result))
    else:
        for violation in result["violations"]:
            print(f"violation: {json.dumps(violation)}")
        source = result["schedule_file"] or f"seed {result['seed']}"
        print(
            f"{source}: {'ok' if result['ok'] else 'VIOLATIONS'}; faults "
            + ", ".join(f"{k} {n}" for k, n in result["faults"].items())
            + f"; events missing {result['events_missing']};"
            f" worst takeover {result['max_takeover_seconds']} s;"
            f" after a kill {result['max_kill_takeover_seconds']} s (worst of {result['kill_takeovers']};"
            f" of a death alone {result['max_kill_takeover_alone_seconds']} s, worst of"
            f" {result['kill_takeovers_alone']});"
            f" longest without a stream {result['max_unstreamed_seconds']} s"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
