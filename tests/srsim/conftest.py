"""srsim fixtures: servers in this process (background threads), stopped after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from srsim.script import GameScript
from srsim.server import SimServer


@pytest.fixture
def server() -> Iterator[Callable[..., SimServer]]:
    """Start an srsim with the given games (heartbeats every 0.05 s unless told)."""
    started: list[SimServer] = []

    def start(games: list[GameScript], **kw: Any) -> SimServer:
        kw.setdefault("heartbeat_seconds", 0.05)
        srv = SimServer(games, **kw).start_background()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()
