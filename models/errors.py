"""The errors of the stores that name a match: no such match, and a write a newer listener run fenced off.

``ListenerError``, the base of every listener error, lives here because the fence (``models.fence``,
``models.match``) raises ``FencedWrite``, one of them: the lowest layer that raises a listener error
holds its base; the listener's own errors (``listener.errors``) and the control plane's
(``lifecycle.errors``) derive from it.
"""

from __future__ import annotations

from config.errors import ErrorKind, KickoffError, NotFound


class MatchNotFound(NotFound):
    """Raised when no Match has the given internal id (or Sportradar id where one is asked)."""


class ListenerError(KickoffError):
    """Base class of the errors raised while starting or running a match listener."""

    kind = ErrorKind.FAILED


class FencedWrite(ListenerError):
    """Raised when a listener run's write carries a fencing token older than its match's current one:
    a successor run started (this one was paused past its lease); nothing was written (exit 16)."""

    kind = ErrorKind.FAILED
