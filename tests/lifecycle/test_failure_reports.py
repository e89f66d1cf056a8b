"""Failure reports against a local HTTP endpoint that receives sentry-sdk's envelopes.

A real listener worker with SENTRY_DSN set: one event per failed attempt, fingerprinted by the
internal match id and tagged with sr_id, exit code and attempt; successes and skips send
nothing; the provider API key never appears in what is sent. Without a DSN sentry-sdk is never
initialised.
"""

from __future__ import annotations

import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from lifecycle.dispatch import request_start
from tests.lifecycle.helpers import beating_row, quick, rows_of
from tests.waiting import wait_for

API_KEY = "test-api-key-never-printed"  # tests/conftest.py's SPORTRADAR_API_KEY


def parse_envelope(body: bytes) -> list[tuple[dict[str, Any], bytes]]:
    """``(item header, payload)`` of every item of a Sentry envelope."""
    items = []
    pos = body.index(b"\n") + 1
    while pos < len(body):
        end = body.find(b"\n", pos)
        end = len(body) if end == -1 else end
        line, pos = body[pos:end], end + 1
        if not line.strip():
            continue
        header = json.loads(line)
        if header.get("length") is not None:
            payload, pos = body[pos : pos + header["length"]], pos + header["length"] + 1
        else:
            end = body.find(b"\n", pos)
            end = len(body) if end == -1 else end
            payload, pos = body[pos:end], end + 1
        items.append((header, payload))
    return items


class SentryEndpoint:
    """A tiny threaded HTTP server standing in for Sentry's ingest: keeps every envelope it gets."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._mu = threading.Lock()
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    raw = gzip.decompress(raw)
                elif encoding == "deflate":
                    raw = zlib.decompress(raw)
                elif encoding == "br":
                    import brotli  # only when sentry-sdk found it installed

                    raw = brotli.decompress(raw)
                with endpoint._mu:
                    endpoint.bodies.append(raw)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def dsn(self) -> str:
        return f"http://publickey@127.0.0.1:{self.server.server_address[1]}/1"

    def events(self) -> list[dict[str, Any]]:
        with self._mu:
            bodies = list(self.bodies)
        return [
            json.loads(payload)
            for body in bodies
            for header, payload in parse_envelope(body)
            if header.get("type") == "event"
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sentry_endpoint() -> Iterator[SentryEndpoint]:
    endpoint = SentryEndpoint()
    yield endpoint
    endpoint.close()


@pytest.fixture
def clean_broker(lifecycle_env):
    yield
    from models.coordination import connect_redis

    client = connect_redis(lifecycle_env["BROKER_URL"])
    for key in client.scan_iter(match=f"{lifecycle_env['BROKER_NAMESPACE']}:*"):
        client.delete(key)


def _tags(event: dict[str, Any]) -> dict[str, str]:
    tags = event.get("tags") or {}
    return dict(tags) if isinstance(tags, dict) else {k: v for k, v in tags}


@pytest.mark.e2e
def test_each_failed_attempt_is_one_event_fingerprinted_by_match_and_without_the_api_key(
    make_match, lcoordination, start_worker, sentry_endpoint, clean_broker
):
    from actors.listeners import send_start

    failing = make_match(listener_start_settings=quick(listener_force_exit_code=11))
    fine = make_match(listener_start_settings=quick(listener_test_exit_code=0))
    skipped = make_match(listener_start_settings=quick(listener_test_exit_code=0))

    def start(match, **overrides) -> None:
        message, note = request_start(
            str(match.id),
            overrides=overrides or None,
            force=False,
            coordination=lcoordination,
            send=send_start,
        )
        assert message is not None, note

    with beating_row(skipped):  # a live listener elsewhere: its start is skipped
        # One thread: messages run in the order sent, and the reports leave in the order captured.
        worker = start_worker(threads=1, env={"SENTRY_DSN": sentry_endpoint.dsn})
        start(fine)
        start(skipped)
        # The worker's own API key (SPORTRADAR_API_KEY) is in the settings the failing run holds;
        # a message can no longer carry one (per-run settings are an allowlist).
        start(failing)
        wait_for(lambda: len(sentry_endpoint.events()) >= 1, timeout=60)
        wait_for(lambda: not lcoordination.barriers.is_pending(failing.id), timeout=30)
        start(failing)
        wait_for(lambda: len(sentry_endpoint.events()) >= 2, timeout=60)

        events = sentry_endpoint.events()
        assert len(events) == 2, [e.get("message") or e.get("exception") for e in events]
        for attempt, event in enumerate(events, start=1):
            assert event["fingerprint"] == ["start_match_listener", str(failing.id)]
            tags = _tags(event)
            assert tags["sr_id"] == failing.sr_id and tags["exit_code"] == "11"
            assert tags["attempt"] == str(attempt) and tags["match_id"] == str(failing.id)
            assert event["exception"]["values"][-1]["type"] == "ListenerRunFailed"
        assert [r.exit_code for r in rows_of(fine)] == [0] and rows_of(skipped)[0].ended_at is None
        sent = b"".join(sentry_endpoint.bodies)
        # The key is nowhere (the run's settings hold it as a SecretStr); that the scrub replaces it
        # where it does appear is the next test's.
        assert API_KEY.encode() not in sent
        assert "ListenerRunFailed" in worker.output()


#: A process that starts reports as a worker does, then fails with the key in a log line's
#: breadcrumb, in a frame's local variable and in the exception's message.
_LEAKING_PROCESS = """
import logging, sys
import sentry_sdk
from actors.reporting import init_reporting
from config.settings import KickoffSettings

assert init_reporting(KickoffSettings(_env_file=None))
key = sys.argv[1]
logging.getLogger("kickoff.test").warning("GET /feed?api_key=%s", key)

def fetch(value):
    raise RuntimeError("the provider refused " + value)

try:
    fetch(key)
except RuntimeError:
    sentry_sdk.capture_exception()
sentry_sdk.flush(timeout=30)
"""


def test_the_api_key_is_replaced_wherever_an_event_holds_it(lifecycle_env, sentry_endpoint):
    env = {**os.environ, "SENTRY_DSN": sentry_endpoint.dsn, "SPORTRADAR_API_KEY": API_KEY}
    done = subprocess.run(
        [sys.executable, "-c", _LEAKING_PROCESS, API_KEY],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    wait_for(lambda: len(sentry_endpoint.events()) >= 1, timeout=60)
    sent = b"".join(sentry_endpoint.bodies)
    assert API_KEY.encode() not in sent
    kinds = {header.get("type") for body in sentry_endpoint.bodies for header, _ in parse_envelope(body)}
    assert "log" not in kinds, kinds  # log records are breadcrumbs, never Sentry logs of their own
    (event,) = sentry_endpoint.events()
    assert event["exception"]["values"][-1]["value"] == "the provider refused [Filtered]"
    frame = event["exception"]["values"][-1]["stacktrace"]["frames"][-1]
    assert frame["function"] == "fetch" and frame["vars"]["value"] == "'[Filtered]'"
    crumbs = [c.get("message") for c in event["breadcrumbs"]["values"]]
    assert "GET /feed?api_key=[Filtered]" in crumbs, crumbs


def test_without_a_dsn_sentry_is_never_initialised(lsettings):
    import sentry_sdk

    from actors.reporting import init_reporting

    assert lsettings.sentry_dsn.get_secret_value() == ""
    assert init_reporting(lsettings) is False
    assert not sentry_sdk.get_client().is_active()


def test_scrub_replaces_the_key_in_every_string_keys_included():
    from actors.reporting import FILTERED, scrub

    event = {
        "extra": {"kwargs": {"overrides": {"sportradar_api_key": API_KEY}}},
        API_KEY: [f"x{API_KEY}y", 3],
    }
    out = scrub(event, (API_KEY,))
    assert API_KEY not in json.dumps(out)
    assert out["extra"]["kwargs"]["overrides"]["sportradar_api_key"] == FILTERED
    assert out[FILTERED] == [f"x{FILTERED}y", 3]
