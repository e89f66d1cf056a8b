"""The sign-in throttle's window on a hand-moved clock (the server tests cannot wait a minute)."""

from __future__ import annotations

from api.console import throttle
from api.console.throttle import SignInThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_past_the_limit_waits_until_its_oldest_refusal_leaves_the_minute():
    clock = Clock()
    limit = SignInThrottle(3, clock=clock)
    for _ in range(2):
        assert limit.admit("a") is None
        limit.refused("a")
        clock.now += 10
    assert limit.admit("a") is None
    assert limit.refused("a") == 3  # refusals at 1000, 1010, 1020
    assert limit.admit("b") is None
    limit.passed("b")
    assert limit.admit("a") == 41  # the one at 1000 leaves the minute at 1060; now 1020
    clock.now = 1060.5
    assert limit.admit("a") is None
    assert limit.refused("a") == 3  # 1010, 1020, 1060.5
    clock.now = 1200
    assert limit.admit("a") is None and limit.refused("a") == 1


def test_sign_ins_being_checked_count_against_the_limit_until_they_pass():
    limit = SignInThrottle(2, clock=Clock())
    assert limit.admit("a") is None and limit.admit("a") is None
    assert limit.admit("a") == 1  # two being checked: a third waits
    limit.passed("a")
    assert limit.admit("a") is None
    limit.refused("a")
    limit.passed("a")
    assert limit.admit("a") is None  # one refusal, nothing being checked


def test_it_remembers_a_bounded_number_of_addresses(monkeypatch):
    monkeypatch.setattr(throttle, "MAX_ADDRESSES", 3)
    limit = SignInThrottle(5, clock=Clock())

    def refuse(address: str) -> int:
        assert limit.admit(address) is None
        return limit.refused(address)

    for address in ("a", "b", "c", "a", "d"):
        refuse(address)
    assert refuse("b") == 1  # refused longest ago: forgotten when d came
    assert refuse("a") == 3
