"""A listener worker cut from the feed takes no start (docs/reliability.md finding 5).

A run that lost its feed past LISTENER_FEED_LOST_SECONDS gives its match back to start at once
elsewhere; the restart must not land on this host's other worker, which shares the cut.
lifecycle.feed_reach judges the feed (a TCP connect, skipped while this process's streams read
feed bytes) and the start gate (actors.draining) closes while it does not answer.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from harness.faultproxy import FaultProxy
from lifecycle.feed_reach import FeedReach, feed_address, tcp_probe

pytestmark = pytest.mark.unit

#: Generous: the probe runs every half second and calls a probe hung after two.
WAIT_SECONDS = 30.0


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.05)


class Probe:
    """A probe that answers or fails on demand and counts its calls."""

    def __init__(self) -> None:
        self.answers = True
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if not self.answers:
            raise OSError("connection refused")


def test_a_feed_never_reached_since_boot_is_not_judged_and_stops_no_start():
    probe = Probe()
    probe.answers = False
    reach = FeedReach(probe=probe, last_byte_at=lambda: None)
    reach.probe_once()
    assert reach.reachable()  # a feed not up yet: the runs say why they fail


def test_a_probe_finds_the_feed_away_judged_or_not_and_nothing_before_its_first_answer():
    """What a run that never went live asks (docs/reliability.md finding 13): a worker booted on a
    host whose feed is refused keeps its gate open, but its runs give their matches back."""
    probe = Probe()
    reach = FeedReach(probe=probe, last_byte_at=lambda: None)
    assert not reach.finds_away()  # no probe finished yet
    probe.answers = False
    reach.probe_once()
    assert reach.reachable() and reach.finds_away()  # not judged, found away all the same
    probe.answers = True
    reach.probe_once()
    assert reach.reachable() and not reach.finds_away()


def test_a_feed_black_holed_since_boot_is_judged_at_its_first_timeout():
    def probe() -> None:
        raise TimeoutError("timed out")  # socket.create_connection's timeout: a dropped SYN

    reach = FeedReach(probe=probe, last_byte_at=lambda: None)
    reach.probe_once()
    assert not reach.reachable()


def test_once_reached_a_feed_that_fails_its_probe_closes_the_gate_until_it_answers():
    probe = Probe()
    reach = FeedReach(probe=probe, last_byte_at=lambda: None)
    reach.probe_once()
    assert reach.reachable() and probe.calls == 1
    probe.answers = False
    reach.probe_once()
    assert not reach.reachable()
    probe.answers = True
    reach.probe_once()
    assert reach.reachable()


def test_streams_reading_feed_bytes_prove_the_feed_without_a_probe():
    probe = Probe()
    probe.answers = False  # would fail: never asked while the streams read
    reach = FeedReach(probe=probe, last_byte_at=time.monotonic)
    reach.probe_once()
    assert reach.reachable() and probe.calls == 0
    silent_since = time.monotonic() - 5.0
    reach = FeedReach(probe=probe, last_byte_at=lambda: silent_since)  # every stream silent: asked
    reach.unreachable()
    reach.probe_once()
    assert probe.calls == 1 and not reach.reachable()


def test_a_run_that_gave_its_match_back_closes_the_gate_at_once():
    probe = Probe()
    reach = FeedReach(probe=probe, last_byte_at=lambda: None)
    reach.unreachable()  # judged from now on, even if the feed never answered a probe
    assert not reach.reachable()
    reach.probe_once()
    assert reach.reachable()


def test_a_probe_without_an_answer_past_the_bound_means_the_feed_is_not_reached():
    release = threading.Event()
    hanging = [False]

    def probe() -> None:
        if hanging[0]:
            release.wait(WAIT_SECONDS)  # a black hole: the connect waits for its timeout

    reach = FeedReach(probe=probe, hang_seconds=0.2, last_byte_at=lambda: None)
    reach.probe_once()
    hanging[0] = True
    thread = threading.Thread(target=reach.probe_once, daemon=True)
    thread.start()
    _wait_for(lambda: not reach.reachable(), "a hung probe closes the gate")
    hanging[0] = False
    release.set()
    thread.join(WAIT_SECONDS)
    assert reach.reachable()


def test_the_feed_address_is_the_base_urls_host_and_port():
    assert feed_address("http://10.0.0.1:8765/_via/h1w0") == ("10.0.0.1", 8765)
    assert feed_address("https://api.sportradar.com") == ("api.sportradar.com", 443)
    assert feed_address("http://feed.example") == ("feed.example", 80)


def test_the_tcp_probe_answers_while_the_feed_listens_and_fails_once_it_refuses():
    with socket.create_server(("127.0.0.1", 0)) as feed, FaultProxy(feed.getsockname()) as proxy:
        probe = tcp_probe(("127.0.0.1", proxy.port), timeout_seconds=1.0)
        probe()  # answered
        proxy.refuse()
        with pytest.raises(OSError):
            probe()
