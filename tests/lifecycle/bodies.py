"""Listener bodies used by tests only."""

from __future__ import annotations

from listener.body import ListenerContext


class Exploding:
    """A body whose run raises (the lifecycle records exit 9)."""

    def run(self, ctx: ListenerContext) -> int:
        raise RuntimeError("boom")

    def request_stop(self) -> None:
        pass
