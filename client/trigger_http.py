"""Triggers over HTTP: the callers' client of ``kickoff serve`` with trigger_client's retry policy.

Connection errors, timeouts and 5xx answers are retried (TRIGGER_RETRY_ATTEMPTS attempts,
TRIGGER_RETRY_INITIAL_SECONDS doubling to TRIGGER_RETRY_MAX_SECONDS); a 4xx answer never is.
Inside a run scope the run id travels as ``X-Run-Id``. Answers become TriggerResult-like
dicts; refusals become the exception tree's trigger errors (422, 409, 503).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import requests

from client.errors import ApiRequestError
from client.trigger_client import is_retryable, retry_delays
from config.settings import KickoffSettings, mask_url
from publisher.errors import (
    TriggerConflictError,
    TriggerReferenceNotFound,
    TriggerUnavailableError,
    TriggerValidationError,
)
from publisher.run_context import RUN_ID_HEADER, get_run_id
from publisher.trigger_queues import ROUTE_PREFIX, queue_of_request
from publisher.trigger_requests import TriggerRequest

logger = logging.getLogger(__name__)

API_KEY_ENV = "KICKOFF_API_KEY"

#: The rumor-action route (a trigger queue's route is in its declaration).
RUMOR_PATH = ROUTE_PREFIX + "/rumor-action"


def path_of(request: Any) -> str:
    """The route of a library trigger request: its queue's (declaration), or rumor-action's."""
    if isinstance(request, TriggerRequest):
        return queue_of_request(type(request)).path
    return RUMOR_PATH


def request_body(request: Any) -> dict[str, Any]:
    """The JSON body of a library trigger request (a rumor request's ``team`` is ``team_id``)."""
    if isinstance(request, TriggerRequest):
        values = {name: request.value(name) for name in type(request).model_fields}
        return {
            name: value.isoformat() if isinstance(value, datetime) else value
            for name, value in values.items()
            if value is not None
        }
    body: dict[str, Any] = {}
    for f in dataclasses.fields(request):
        value = getattr(request, f.name)
        if f.name == "team":
            body["team_id"] = value
        elif f.name == "signals":
            body["signals"] = [{k: v for k, v in vars(s).items() if v is not None} for s in value]
        elif f.name == "roster":
            body["roster"] = {str(k): v for k, v in value.items()}
        elif isinstance(value, datetime):
            body[f.name] = value.isoformat()
        elif value is not None:
            body[f.name] = value
    return body


def _error(status: int, data: dict[str, Any]) -> Exception:
    message = str(data.get("error") or f"HTTP {status}")
    if status == 422 and data.get("field"):
        field = str(data["field"])
        reason = message.split(": ", 1)[1] if message.startswith(f"{field}: ") else message
        return TriggerValidationError(field, reason)
    if status == 404 and data.get("field"):  # an action the request names does not exist
        field = str(data["field"])
        reason = message.split(": ", 1)[1] if message.startswith(f"{field}: ") else message
        return TriggerReferenceNotFound(field, reason)
    if status == 409:
        return TriggerConflictError(message)
    if status >= 500:  # retryable (trigger_client.is_retryable)
        return TriggerUnavailableError(message, tracking_id=data.get("tracking_id"))
    return ApiRequestError(status, message)


class HttpTriggerClient:
    """Sends triggers to ``base_url`` with ``Authorization: Bearer api_key``; one per caller thread."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        settings: KickoffSettings,
        timeout: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.attempts = settings.trigger_retry_attempts
        self.delays = retry_delays(
            attempts=self.attempts,
            initial=settings.trigger_retry_initial_seconds,
            maximum=settings.trigger_retry_max_seconds,
        )
        self.sleep = sleep
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {api_key}"

    def headers(self) -> dict[str, str]:
        """Per-request headers: X-Run-Id inside a run scope."""
        run_id = get_run_id()
        return {RUN_ID_HEADER: run_id} if run_id else {}

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST ``body`` as JSON; failures are retried by trigger_client's ``is_retryable``.

        A connection error, a timeout or a 5xx answer is a TriggerUnavailableError (retried);
        422, 409 and other 4xx answers are not retryable and raised at once.
        """
        url = self.base_url + path
        for attempt in range(1, self.attempts + 1):
            try:
                response = self.session.post(url, json=body, headers=self.headers(), timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                reason = f"cannot reach {mask_url(url)}: {type(exc).__name__}"
                failure: Exception = TriggerUnavailableError(reason)
                failure.__cause__ = exc
                status: int | None = None
            else:
                status = response.status_code
                try:
                    data = response.json()
                except ValueError:
                    data = {"error": response.text[:200]}
                if status < 400:
                    return status, data
                failure = _error(status, data)
            if not is_retryable(failure) or attempt == self.attempts:
                raise failure
            delay = self.delays[attempt - 1]
            logger.warning(
                "trigger attempt %s/%s to %s failed (%s), retrying in %ss",
                attempt,
                self.attempts,
                path,
                status or "no answer",
                delay,
            )
            self.sleep(delay)
        raise AssertionError("unreachable")

    def send(self, request: Any) -> dict[str, Any]:
        """Send a library trigger request (LineupRequest, WaiverRequest, ...) to its route."""
        _, data = self.post(path_of(request), request_body(request))
        return data

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> HttpTriggerClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
