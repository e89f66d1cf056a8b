"""What the nemesis records of a feed black hole (harness/chaos/nemesis.py), on a stand-in host:
the feed connections the host gave up inside it, a reused port included."""

from __future__ import annotations

from harness.chaos.nemesis import Nemesis
from harness.chaos.schedule import Fault


class GivingUpHost:
    """A test host's surface the nemesis uses for a partition; each heal of the feed gives up
    ``port`` (as ``harness.hosts.TestHost._reset_given_up`` logs it)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.given_up: dict[str, set[int]] = {}
        self.given_up_log: list[tuple[str, int]] = []

    def cut(self, services: list[str], kind: str) -> None:
        pass

    def heal(self, services: list[str]) -> None:
        if "feed" in services:
            self.given_up.setdefault("feed", set()).add(self.port)
            self.given_up_log.append(("feed", self.port))


def test_a_port_given_up_again_after_its_reuse_is_recorded_by_the_later_black_hole_too():
    host = GivingUpHost(41942)
    nemesis = Nemesis(fleet=None, hosts=[host], redis=None)  # type: ignore[arg-type]
    cut = Fault(at=0.0, kind="partition-feed", host=0, worker=None, seconds=0.01, mode="blackhole")
    first = nemesis._inject(cut, 0.0)
    second = nemesis._inject(cut, 0.0)
    assert first.gave_up == (41942,)
    assert second.gave_up == (41942,)  # another connection from the same port, given up again
    refused = nemesis._inject(Fault(0.0, "partition-feed", 0, None, 0.01, mode="refuse"), 0.0)
    assert refused.gave_up == () and not refused.feed_blackholed
