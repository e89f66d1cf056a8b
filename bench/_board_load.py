"""Issue 24's load figure: trigger latency and PostgreSQL transactions under board viewers and scrapers."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
import psycopg2

from api.keys import Scope, create_key
from bench._setup import ADMIN_DB, percentile
from config.clock import utcnow
from models.db import database

#: Matches of the board with a running listener: their heartbeat ages change every refresh.
RUNNING = 20
SCRAPE_EVERY_SECONDS = 15.0
TRIGGER_EVERY_SECONDS = 0.02


def seed_board(matches: int) -> None:
    """``matches`` matches in 4 leagues, ``RUNNING`` of them with an open listener run."""
    now = utcnow()
    with database.atomic():
        leagues = []
        for name in ("nfl", "nhl", "mlb", "nba"):
            (lid,) = database.execute_sql(
                "INSERT INTO leagues (name, enabled) VALUES (%s, true) RETURNING id", (name,)
            ).fetchone()
            leagues.append(lid)
        rows = [
            (str(uuid.uuid4()), f"sr:match:bench-{n}", leagues[n % 4], now + timedelta(minutes=n))
            for n in range(matches)
        ]
        for start in range(0, len(rows), 1000):
            chunk = rows[start : start + 1000]
            database.execute_sql(
                "INSERT INTO matches (id, sr_id, league_id, scheduled, status, is_test,"
                " auto_dispatch_listener, listener_start_settings, created_at, updated_at)"
                " SELECT u.id::uuid, u.sr, u.lg, u.sch,"
                " 'scheduled', false, false, '{}'::jsonb, now(), now()"
                " FROM unnest(%s::text[], %s::text[], %s::int[], %s::timestamptz[]) AS u(id, sr, lg, sch)",
                tuple(list(col) for col in zip(*chunk, strict=True)),
            )
        # every match has a run (so it is on the board): RUNNING open ones, the others ended with 0
        database.execute_sql(
            "INSERT INTO match_listener_records (id, match_id, created_at, heartbeat_at, ended_at, exit_code,"
            " dry_run) SELECT gen_random_uuid(), m.id, now() - interval '2 hours', now() - interval '1 hour',"
            " CASE WHEN n <= %s THEN NULL ELSE now() - interval '1 hour' END,"
            " CASE WHEN n <= %s THEN NULL ELSE 0 END, false"
            " FROM (SELECT id, row_number() OVER (ORDER BY sr_id) AS n FROM matches) m",
            (RUNNING, RUNNING),
        )
        database.execute_sql(
            "UPDATE match_listener_records SET heartbeat_at = now(), created_at = now()"
            " WHERE ended_at IS NULL"
        )
    database.close()


def xact_commits(db_name: str) -> int:
    """Committed transactions of ``db_name`` so far (pg_stat_database, after a stats flush)."""
    with psycopg2.connect(f"{ADMIN_DB}/postgres") as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_stat_force_next_flush()")
        cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (db_name,))
        (count,) = cur.fetchone()
    conn.close()
    return int(count)


class Viewer:
    """One console session of its own operator key, reading a live board (``path``: the listener board's
    stream, or the Matches board's ``/events/matches``) and discarding it.

    ``died``: why its stream ended (or could not start) before it was told to stop; a dead viewer
    fails the bench, as it no longer costs the server what a viewer costs."""

    def __init__(self, url: str, cookie: str, path: str = "/events/board") -> None:
        self.cookie = cookie
        self.path = path
        self.url = urlsplit(url)
        self.bytes = 0
        self.died: str | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)

    @classmethod
    def signed_in(cls, url: str, path: str = "/events/board") -> Viewer:
        """A viewer of ``path`` with a new operator key, signed in to the console at ``url``."""
        _, key = create_key(name=f"viewer-{uuid.uuid4().hex[:6]}", scope=Scope.OPERATOR)
        with httpx.Client(base_url=url, timeout=60, headers={"Origin": url}) as client:
            answer = client.post("/sign-in", data={"api_key": key, "next": "/"})
            if answer.status_code != 303:
                raise SystemExit(f"a viewer could not sign in: {answer.status_code} {answer.text[:200]}")
            return cls(url, "; ".join(f"{k}={v}" for k, v in client.cookies.items()), path)

    def _read(self) -> None:
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=60)
        try:
            conn.request("GET", self.path, headers={"Cookie": self.cookie})
            answer = conn.getresponse()
            if answer.status != 200:
                self.died = f"HTTP {answer.status}: {answer.read()[:200]!r}"
                return
            while not self.stop.is_set():
                chunk = answer.read1(1 << 16)
                if not chunk:
                    self.died = "the stream ended"
                    break
                self.bytes += len(chunk)
            if conn.sock is not None:  # None once the server closed the stream
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, http.client.HTTPException) as exc:
            if not self.stop.is_set():
                self.died = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()


def _triggers(
    url: str, key: str, seconds: float, body: Callable[[int, str], dict], tag: str, unpublished: list[str]
) -> list[tuple[float, float]]:
    """One keep-alive client's triggers, one every TRIGGER_EVERY_SECONDS for ``seconds``: (sent at,
    ms) of each published one (202 ``queued``, the broker's confirm in); each other answer is
    added to ``unpublished``."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    out: list[tuple[float, float]] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        start = time.perf_counter()
        conn.request("POST", "/v1/trigger/lineup", body=json.dumps(body(i, tag)), headers=headers)
        answer = conn.getresponse()
        text = answer.read()
        ms = (time.perf_counter() - start) * 1000
        if i >= 10:
            if published(answer.status, text):
                out.append((start, ms))
            else:
                unpublished.append(f"{answer.status} {text[:120]!r}")
        i += 1
        time.sleep(max(0.0, TRIGGER_EVERY_SECONDS - (time.perf_counter() - start)))
    conn.close()
    return out


def published(status: int, text: bytes) -> bool:
    """A trigger's HTTP answer says its message was published: 202 ``queued``, confirmed by the
    broker (202 ``pending`` is saved for the drain, not published)."""
    if status != 202:
        return False
    try:
        body = json.loads(text)
    except ValueError:
        return False
    return body.get("status") == "queued" and body.get("published") is True


def _scraper(url: str, offset: float, stop: threading.Event, spans: list[tuple[float, float]]) -> None:
    """Scrape /metrics every SCRAPE_EVERY_SECONDS (after ``offset``); ``spans``: (start, end) of each."""
    if stop.wait(offset):
        return
    with httpx.Client(base_url=url, timeout=120) as client:
        while True:
            start = time.perf_counter()
            assert client.get("/metrics").status_code == 200
            spans.append((start, time.perf_counter()))
            if stop.wait(SCRAPE_EVERY_SECONDS):
                return


def _streams_window(db_name: str, viewers: list[Viewer], seconds: float) -> int:
    """Transactions of the bench database while ``viewers`` stream (and nothing else runs)."""
    deadline = time.monotonic() + 120
    while any(v.bytes == 0 and v.died is None for v in viewers) and time.monotonic() < deadline:
        time.sleep(0.1)  # every stream connected (its session checked once) and got its first board
    time.sleep(2.0)
    before = xact_commits(db_name)
    time.sleep(seconds)
    return xact_commits(db_name) - before


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def board_load(
    url: str,
    key: str,
    settings: object,
    *,
    viewers: int,
    scrapers: int,
    board: int,
    seconds: float,
    body: Callable[[int, str], dict],
    matches_viewers: int = 0,
) -> dict[str, object]:
    """The idle and loaded trigger figures and the streams' transactions, with the ratios (printed too).

    ``matches_viewers`` of the ``viewers`` watch the Matches board (its default window) instead of the
    listener board; then the one-viewer window has one viewer on each board. ``dead_viewers``: viewers
    whose stream died, or that received nothing while the loaded triggers ran; ``unpublished``:
    triggers not answered 202 ``queued``."""
    db_name = settings.database_url.rsplit("/", 1)[1]
    seed_board(board)
    print(f"board: {board} matches, {RUNNING} running; load average {_load()}")
    unpublished: list[str] = []
    idle = [ms for _, ms in _triggers(url, key, seconds, body, "idle", unpublished)]
    print(
        f"idle:    triggers p50 {percentile(idle, 50):.1f} ms  p99 {percentile(idle, 99):.1f} ms "
        f"({len(idle)} published; load average {_load()})"
    )
    paths = ["/events/matches"] * matches_viewers + ["/events/board"] * (viewers - matches_viewers)
    one = [Viewer.signed_in(url, p) for p in sorted(set(paths))]
    for v in one:
        v.thread.start()
    tx_one = _streams_window(db_name, one, seconds)
    rest = list(paths)
    for v in one:
        rest.remove(v.path)
    crowd = one + [Viewer.signed_in(url, p) for p in rest]
    for v in crowd[len(one) :]:
        v.thread.start()
    tx_many = _streams_window(db_name, crowd, seconds)
    first = " and ".join(f"1 on {p}" for p in sorted(set(paths)))
    split = f" ({matches_viewers} on the Matches board)" if matches_viewers else ""
    print(
        f"streams: {tx_one} transactions in {seconds:.0f} s with {first}, {tx_many} with {viewers}{split} "
        f"({tx_many / max(tx_one, 1):.2f} x)"
    )
    stop = threading.Event()
    scrapes: list[tuple[float, float]] = []
    scraper_threads = [
        threading.Thread(target=_scraper, args=(url, i * SCRAPE_EVERY_SECONDS / scrapers, stop, scrapes))
        for i in range(scrapers)
    ]
    for t in scraper_threads:
        t.start()
    before = [v.bytes for v in crowd]
    timed = _triggers(url, key, seconds, body, "loaded", unpublished)
    during = [v.bytes - b for v, b in zip(crowd, before, strict=True)]
    stop.set()
    for t in scraper_threads:
        t.join()
    dead = [
        v.died or "received nothing while the triggers ran"
        for v, got in zip(crowd, during, strict=True)
        if v.died or not got
    ]
    for v in crowd:
        v.stop.set()
    loaded = [ms for _, ms in timed]
    beside = [ms for at, ms in timed if not any(a - 0.05 <= at <= b for a, b in scrapes)]
    slowest = max((b - a for a, b in scrapes), default=0.0) * 1000
    figures: dict[str, object] = {
        "board": board,
        "viewers": viewers,
        "scrapers": scrapers,
        "seconds": seconds,
        "idle_p50_ms": percentile(idle, 50) if idle else None,
        "idle_p99_ms": percentile(idle, 99) if idle else None,
        "loaded_p50_ms": percentile(loaded, 50) if loaded else None,
        "loaded_p99_ms": percentile(loaded, 99) if loaded else None,
        "loaded_beside_scrapes_p99_ms": percentile(beside, 99) if beside else None,
        "tx_one_viewer": tx_one,
        "tx_viewers": tx_many,
        "tx_ratio": tx_many / max(tx_one, 1),
        "received_mib": sum(during) / 2**20,
        "scrapes": len(scrapes),
        "slowest_scrape_ms": slowest,
        "dead_viewers": len(dead),
        "unpublished": len(unpublished),
        "p99_ratio": percentile(loaded, 99) / percentile(idle, 99) if idle and loaded else None,
    }
    print(
        f"loaded:  triggers p50 {figures['loaded_p50_ms'] or 0:.1f} ms  "
        f"p99 {figures['loaded_p99_ms'] or 0:.1f} ms "
        f"({len(loaded)} published; {viewers} viewers received {figures['received_mib']:.0f} MiB; "
        f"{len(scrapes)} scrapes, slowest {slowest:.0f} ms; load average {_load()})"
    )
    if beside:
        print(
            f"  of which sent while no scrape ran: p50 {percentile(beside, 50):.1f} ms  "
            f"p99 {percentile(beside, 99):.1f} ms ({len(beside)} triggers)"
        )
    if figures["p99_ratio"] is not None:
        print(f"loaded p99 / idle p99: {figures['p99_ratio']:.2f} x")
    for reason in sorted(set(dead)):
        print(f"dead viewers: {dead.count(reason)} ({reason})")
    for answer in sorted(set(unpublished))[:5]:
        print(f"not published: {unpublished.count(answer)} x {answer}")
    return figures
