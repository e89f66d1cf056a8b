"""The errors of kickoff's own trigger clients."""

from __future__ import annotations

from config.errors import ErrorKind, KickoffError


class ApiRequestError(KickoffError):
    """Raised by the HTTP trigger client for a 4xx answer other than 422/409 (401, 403, 404, 413, 415)."""

    kind = ErrorKind.FAILED

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"HTTP {status}: {message}")
