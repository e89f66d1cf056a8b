"""Listener bodies used by tests only."""

from __future__ import annotations

from listener.body import ListenerContext


class Exploding:
    """A body whose run raises (the lifecycle records exit 9)."""

    def run(self, ctx: ListenerContext) -> int:
        raise RuntimeError("boom")

    def request_stop(self) -> None:
        pass


class _Quiet:
    def request_stop(self) -> None:
        pass


class ReturnsNone(_Quiet):
    """A body that returns None (a clean return, exit 0)."""

    def run(self, ctx: ListenerContext) -> None:
        return None


class ExitsNone(_Quiet):
    """A body that calls ``sys.exit()`` (SystemExit(None): a clean return, exit 0)."""

    exit_arg: object = None

    def run(self, ctx: ListenerContext) -> int:
        raise SystemExit(self.exit_arg)


class ExitsThree(ExitsNone):
    """A body that calls ``sys.exit(3)`` (an unexpected exit 3)."""

    exit_arg = 3


class ExitsWithMessage(ExitsNone):
    """A body that calls ``sys.exit("feed gone")`` (exit 1, as a process would)."""

    exit_arg = "feed gone"


class ReturnsFourteen(_Quiet):
    """A body that returns 14 by itself (only cleanup may record Abandoned: a failed start)."""

    def run(self, ctx: ListenerContext) -> int:
        return 14


class ExitsFifteen(ExitsNone):
    """A body that calls ``sys.exit(15)`` by itself (only a stop may record Stopped: a failed start)."""

    exit_arg = 15
