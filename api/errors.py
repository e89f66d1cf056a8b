"""The API's and the console's own errors, and the one mapping from the KickoffError tree to HTTP answers:
status code and a JSON body naming the problem."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field

from config.errors import ConsoleError, ErrorKind, KickoffError, NotFound, ServiceUnavailable, kind_of
from config.public_text import public_text
from lifecycle.errors import PlayByPlayUnusable
from runs.errors import InvalidRunParams, UnknownJob

logger = logging.getLogger(__name__)


# -- the API's and the console's errors ---------------------------------------------------------


class ApiKeyNotFound(NotFound):
    """Raised when no API key has the given id (``kickoff apikeys revoke``)."""


class SignInRefused(ConsoleError):
    """Raised when a presented API key cannot open a console session (unknown, revoked, trigger scope)."""


class StreamLimitReached(ConsoleError):
    """Raised when a live board stream would pass CONSOLE_STREAMS_PER_SESSION or _PER_PROCESS (429)."""

    kind = ErrorKind.LIMITED


class KeyNameTaken(KickoffError):
    """Raised when an API key would get a name another key has (case-insensitively): 409."""

    kind = ErrorKind.CONFLICT


class RateLimited(KickoffError):
    """Raised when an act that calls the provider is asked again too soon (archive verification): 429."""

    kind = ErrorKind.LIMITED


class SignInRequired(ConsoleError):
    """Raised when a console page is asked for without a live session (answered with the sign-in form)."""

    def __init__(self, next_path: str) -> None:
        super().__init__(f"sign in to see {next_path}")
        self.next_path = next_path


# -- the mapping to HTTP answers ----------------------------------------------------------------


#: The HTTP status of each kind of error (the one table; a class declares its kind).
STATUS_OF: dict[ErrorKind, int] = {
    ErrorKind.INVALID: 422,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.CONFLICT: 409,
    ErrorKind.UNAVAILABLE: 503,
    ErrorKind.UPSTREAM: 502,  # the feed answered, but not a play-by-play kickoff can use
    ErrorKind.REFUSED: 403,
    ErrorKind.LIMITED: 429,
    ErrorKind.MISCONFIGURED: 500,
    ErrorKind.FAILED: 500,
}

#: What the console adds to an error's message, by kind (the one table of its notices).
NOTICE_OF: dict[ErrorKind, str] = {
    ErrorKind.INVALID: "nothing was changed",
    ErrorKind.NOT_FOUND: "not found",
    ErrorKind.CONFLICT: "nothing was changed",
    ErrorKind.UNAVAILABLE: "try again in a moment",
    ErrorKind.UPSTREAM: "try again later",
    ErrorKind.REFUSED: "not allowed",
    ErrorKind.LIMITED: "try again later",
    ErrorKind.MISCONFIGURED: "check the settings",
    ErrorKind.FAILED: "see the server log",
}

# Errors whose field is known without a ``field`` attribute.
FIELD_OF: dict[type[KickoffError], str] = {UnknownJob: "job", InvalidRunParams: "params"}


def status_of(exc: KickoffError) -> int:
    """The HTTP status of ``exc``: its kind's (STATUS_OF)."""
    return STATUS_OF[kind_of(exc)]


def console_message(exc: KickoffError) -> str:
    """The console's notice of ``exc``: its public message and what its kind means (NOTICE_OF)."""
    return f"{public_message(exc)} ({NOTICE_OF[kind_of(exc)]})"


def public_message(exc: KickoffError) -> str:
    """The message of ``exc`` for a caller: an unreachable service names its setting, no message a URL,
    an address, a virtual host or a path (config.public_text).

    The full message (the address masked) is for the server's log.
    """
    if isinstance(exc, PlayByPlayUnusable):
        return f"the feed ({exc.setting}) answered a play-by-play kickoff cannot use"
    if isinstance(exc, ServiceUnavailable):
        return f"cannot reach {exc.service} ({exc.setting})"
    return public_text(str(exc)) or type(exc).__name__


def error_body(exc: KickoffError) -> dict[str, Any]:
    """The JSON answer of ``exc``: ``error`` (its public message); ``field``, ``setting``, ``tracking_id``."""
    body: dict[str, Any] = {"error": public_message(exc)}
    field = getattr(exc, "field", None)
    if field is None:
        field = next((f for cls, f in FIELD_OF.items() if isinstance(exc, cls)), None)
    if field is not None:
        body["field"] = field
    if isinstance(exc, ServiceUnavailable):
        body["setting"] = exc.setting
    tracking_id = getattr(exc, "tracking_id", None)
    if tracking_id is not None:
        body["tracking_id"] = tracking_id
    if getattr(exc, "retryable", False) or isinstance(exc, ServiceUnavailable):
        body["retryable"] = True
    return body


class FieldProblem(BaseModel):
    """One refused field of a request (422)."""

    field: str
    msg: str


class ErrorAnswer(BaseModel):
    """The body of every error answer: what is wrong, and the request's id to quote."""

    error: str = Field(description="What is wrong, in one line (it never names a server path or URL).")
    request_id: str | None = Field(None, description="The request's X-Request-Id.")
    field: str | None = Field(None, description="The refused field, when one is (400, 409, 422).")
    errors: list[FieldProblem] | None = Field(None, description="Every refused field (422 from validation).")
    tracking_id: str | None = Field(None, description="The action the answer concerns, when known.")
    retryable: bool | None = Field(None, description="True: the same request may succeed later (503).")


#: What each error status means on this API (the OpenAPI document's descriptions).
ERROR_STATUSES: dict[int, str] = {
    400: "The body is not valid JSON, or a header is malformed.",
    401: "No API key, or the key is unknown or revoked (Authorization: Bearer KEY).",
    403: "The key's scope does not cover this route, or the key may not act here (a league it is not"
    " limited to, another key's action).",
    404: "No such resource (the id in the path, or one the body names).",
    409: "Conflict with the current state (nothing was changed).",
    413: "The body is larger than API_MAX_BODY_BYTES.",
    415: "The body is not JSON (Content-Type: application/json).",
    422: "A field is refused (named in `field`); nothing was saved or sent.",
    429: "Asked again too soon (an act that calls the provider is limited per match): retry later.",
    502: "An upstream refused or garbled the request: the broker refused the message (it is recorded; see"
    " the answer), or the feed answered a play-by-play kickoff cannot use (`setting` names it).",
    503: "A service (PostgreSQL, Redis, the broker) is unavailable: retry.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries of ``statuses``: each described, its body an ErrorAnswer."""
    return {status: {"model": ErrorAnswer, "description": ERROR_STATUSES[status]} for status in statuses}
