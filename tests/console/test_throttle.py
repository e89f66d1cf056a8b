"""The sign-in throttle's window on a hand-moved clock (the server tests cannot wait a minute), its
refusals in PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from api.console.throttle import SignInThrottle, account_bucket

pytestmark = pytest.mark.services


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


A, B = ("account:a",), ("account:b",)


def test_a_bucket_past_the_limit_waits_until_its_oldest_refusal_leaves_the_minute(db):
    clock = Clock()
    limit = SignInThrottle(3, trust_address=False, clock=clock)
    for _ in range(2):
        assert limit.admit(A) is None
        limit.refused(A)
        clock.advance(10)
    assert limit.admit(A) is None
    assert limit.refused(A) == 3  # refusals at 0, 10 and 20 s
    assert limit.admit(B) is None
    limit.passed(B)
    assert limit.admit(A) == 41  # the one at 0 s leaves the minute at 60 s; now 20 s
    clock.advance(40.5)
    assert limit.admit(A) is None
    assert limit.refused(A) == 3  # 10, 20 and 60.5 s
    clock.advance(200)
    assert limit.admit(A) is None and limit.refused(A) == 1


def test_sign_ins_being_checked_count_against_the_limit_until_they_pass(db):
    limit = SignInThrottle(2, trust_address=False, clock=Clock())
    assert limit.admit(A) is None and limit.admit(A) is None
    assert limit.admit(A) == 1  # two being checked: a third waits
    limit.passed(A)
    assert limit.admit(A) is None
    limit.refused(A)
    limit.passed(A)
    assert limit.admit(A) is None  # one refusal, nothing being checked


def test_a_sign_in_counts_per_key_and_per_address_only_when_the_address_is_trusted():
    plain = SignInThrottle(10, trust_address=False)
    trusted = SignInThrottle(10, trust_address=True)
    assert plain.buckets(" kk_x ", "10.0.0.1") == (account_bucket("kk_x"),)
    assert trusted.buckets("kk_x", "10.0.0.1") == (account_bucket("kk_x"), "address:10.0.0.1")
    assert "kk_x" not in account_bucket("kk_x") and len(account_bucket("kk_x")) == len("account:") + 16
