"""Stream ingest benchmark: events per second one MatchListener sustains from a fast srsim.

Runs ``kickoff sim serve`` as a subprocess with one game of N events sent as fast as srsim can,
and one listener in this process (record-only, archive on, no database). Prints events/s for
both framings (SSE and the provider's NDJSON). Goal: >= 10,000 events/s.

With ``--log`` the listener records into the match event log in PostgreSQL instead (DATABASE_URL,
migrated; a match row and a lifecycle row id, so de-duplication and fencing are on), as a worker's
run does (issue 34).

    .venv/bin/python bench/stream_ingest.py [--events 100000] [--log]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._srsim import start_sim, write_games
from config import spans
from config.settings import MatchListenerEnvironment
from listener.body import ListenerContext
from listener.match_listener import MatchListener

GOAL = 10_000


class TimedListener(MatchListener):
    """Remembers when the first and the last event arrived."""

    first = last = 0.0

    def _handle(self, raw):  # type: ignore[no-untyped-def]
        before = self.stats.events
        super()._handle(raw)
        if self.stats.events != before:
            now = time.perf_counter()
            self.first = self.first or now
            self.last = now


def _log_match(sr_id: str) -> str:
    """A match row for ``sr_id`` in DATABASE_URL's database (migrated first): its id."""
    import os

    from config.clock import utcnow
    from models.db import init_database
    from models.league import League
    from models.match import Match
    from models.migrate import migrate

    url = os.environ["DATABASE_URL"]
    migrate(url)
    init_database(url)
    league, _ = League.get_or_create(name="mlb")
    return str(Match.create(league=league, sr_id=sr_id, status="inprogress", scheduled=utcnow()).id)


def run(events: int, fmt: str, tmp: Path, *, log: bool = False) -> tuple[float, int]:
    sr_id = str(uuid.uuid4())
    match_id = _log_match(sr_id) if log else ""
    # The whole game is due 2 s after start: srsim sends it as fast as the listener reads.
    script = write_games(
        tmp / f"{fmt}.json", [sr_id], start_after=2.0, event_interval=1e-6, event_count=events
    )
    proc, base_url = start_sim(script, heartbeat_seconds=0.2)
    try:
        settings = MatchListenerEnvironment(
            _env_file=None,
            data_dir=tmp / "data",
            sportradar_base_url=base_url,
            listener_sr_request_match_uuid=sr_id,
            listener_sr_url_league="mlb",
            listener_stream_format=fmt,
            listener_skip_processing=True,
            listener_status_reload_heartbeats=3,
            listener_max_consecutive_heartbeats=20,
        )
        body = TimedListener()
        record_id = str(uuid.uuid4()) if log else None
        context = ListenerContext(match_id=match_id, record_id=record_id, is_test=False, settings=settings)
        with spans.span("listener run"), spans.quiet():  # as lifecycle.start runs a body (tracing on)
            code = body.run(context)
        span = body.last - body.first
        assert code in (10, 13), (code, body.exit_reason, body.stats)
        return body.stats.events / span if span else 0.0, body.stats.events
    finally:
        proc.kill()
        proc.wait(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="Issue 41: each framing with tracing off, then on (an unreachable OTLP collector), in turns; "
        "prints the ratio (goal >= 0.95)",
    )
    parser.add_argument("--log", action="store_true", help="Record into the event log (DATABASE_URL).")
    args = parser.parse_args()
    if args.tracing:
        raise SystemExit(_tracing_ratio(args.events))
    with tempfile.TemporaryDirectory() as d:
        where = "the event log (PostgreSQL)" if args.log else "archive on"
        print(f"stream ingest: one listener, {args.events} events, {where}, record-only")
        for fmt in ("sse", "ndjson"):
            rate, n = run(args.events, fmt, Path(d), log=args.log)
            print(
                f"  {fmt:7s} {n:8d} events  {rate:10,.0f} events/s  ({rate / GOAL:.1f}x the {GOAL:,}/s goal)"
            )


def _tracing_ratio(events: int, rounds: int = 3) -> int:
    """Median events/s with tracing off and on, alternating; 1 when on is under 95 % of off."""
    import os
    import statistics

    from bench._setup import tracing_env
    from config import tracing

    saved = dict(os.environ)
    os.environ.update(tracing_env(True))  # this process only: srsim runs as always
    tracing.configure_tracing(service="kickoff-bench")
    os.environ.clear()
    os.environ.update(saved)
    code = 0
    with tempfile.TemporaryDirectory() as d:
        for fmt in ("sse", "ndjson"):
            rates: dict[bool, list[float]] = {False: [], True: []}
            for n in range(rounds):
                for on in (False, True):
                    tracing._state.on = on
                    tmp = Path(d) / f"{fmt}-{n}-{on}"  # a fresh archive each run
                    tmp.mkdir()
                    rates[on].append(run(events, fmt, tmp)[0])
                    print(
                        f"    {fmt} tracing {'on' if on else 'off'}: {rates[on][-1]:,.0f} events/s",
                        flush=True,
                    )
            off, on_ = statistics.median(rates[False]), statistics.median(rates[True])
            print(
                f"  {fmt:7s} tracing off {off:10,.0f} events/s, on {on_:10,.0f}: {on_ / off:.3f} "
                "(goal >= 0.95)"
            )
            code |= on_ / off < 0.95
    return int(code)


if __name__ == "__main__":
    main()
