"""A listener worker takes starts only while it may run them: not draining, and its worker lease held."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import draining
from actors.draining import DrainableConsumer, gate_starts_on, taking_starts


class _Inner:
    def __init__(self) -> None:
        self.fetches = 0

    def __next__(self) -> str:
        self.fetches += 1
        return "start"


@pytest.fixture(autouse=True)
def _no_gate(monkeypatch) -> Iterator[None]:
    monkeypatch.setattr(draining, "DRAINING_IDLE_SECONDS", 0.0)
    yield
    gate_starts_on(None)
    draining.resume_taking_starts()


def test_a_worker_without_its_lease_fetches_no_start_until_it_holds_one_again():
    held = [False]
    gate_starts_on(lambda: held[0])
    inner = _Inner()
    consumer = DrainableConsumer(inner)  # type: ignore[arg-type]
    assert not taking_starts()
    assert next(consumer) is None and inner.fetches == 0  # left in the queue for the other workers
    held[0] = True
    assert taking_starts() and next(consumer) == "start" and inner.fetches == 1


def test_a_draining_worker_takes_no_start_even_with_its_lease():
    gate_starts_on(lambda: True)
    draining.stop_taking_starts()
    inner = _Inner()
    assert next(DrainableConsumer(inner)) is None and inner.fetches == 0  # type: ignore[arg-type]
