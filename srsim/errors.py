"""The errors of the feed simulator (srsim)."""

from __future__ import annotations

from config.errors import ErrorKind, KickoffError


class SimulatorScriptError(KickoffError):
    """Raised when an srsim script file is missing, not JSON, or lacks a required field."""

    kind = ErrorKind.FAILED
