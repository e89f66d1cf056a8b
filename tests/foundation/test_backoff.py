from __future__ import annotations

import pytest

from config.backoff import backoff_seconds


def test_the_wait_doubles_per_failure_from_the_base_until_the_cap():
    assert [backoff_seconds(n, base=0.5, cap=10.0) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 10, 10]


@pytest.mark.parametrize("failure", [0, -3])
def test_no_failure_yet_waits_the_base(failure):
    assert backoff_seconds(failure, base=5.0, cap=900.0) == 5.0


def test_a_very_long_run_of_failures_waits_the_cap_without_overflowing():
    assert backoff_seconds(10_000, base=1.0, cap=30.0) == 30.0
