"""trigger_client: the callers' helper that sends triggers with the spec's retry policy and X-Run-Id.

Connection errors, timeouts and server-side errors (the 5xx family: an unreachable database,
an unreadable parent, a draft target that was not delivered) are retried: six attempts, 5 s
doubling to 30 s. Validation and conflict errors (the 4xx family) are never retried. The run id
of the enclosing run scope travels as ``X-Run-Id`` and links the new action to that run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from config.backoff import backoff_seconds
from config.errors import ServiceUnavailable
from config.settings import KickoffSettings
from publisher.amqp import AmqpPublisher
from publisher.errors import TriggerError, TriggerUnavailableError
from publisher.run_context import RUN_ID_HEADER, get_run_id
from publisher.trigger_queues import queue_of_request
from publisher.trigger_requests import TriggerRequest
from publisher.triggers import (
    DraftPickRequest,
    LineupRequest,
    TriggerResult,
    WaiverRequest,
    sender_of,
    trigger_draft_pick,
    trigger_lineup,
    trigger_waiver,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    """True for connection errors, timeouts and server-side errors; never for validation or conflicts."""
    if isinstance(exc, TriggerUnavailableError | ServiceUnavailable):
        return True
    if isinstance(exc, TriggerError):
        return False  # validation (422) and conflict (409)
    return isinstance(exc, ConnectionError | TimeoutError)


def retry_delays(*, attempts: int, initial: float, maximum: float) -> list[float]:
    """The sleeps between ``attempts`` attempts: ``initial`` doubling, capped at ``maximum``."""
    return [backoff_seconds(n, base=initial, cap=maximum) for n in range(1, attempts)]


class TriggerClient:
    """Sends triggers (any declared queue's, ``send``) with retries; one per caller thread."""

    def __init__(
        self,
        *,
        publisher: AmqpPublisher,
        settings: KickoffSettings,
        attempts: int | None = None,
        initial_delay: float | None = None,
        max_delay: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.publisher = publisher
        self.settings = settings
        self.attempts = attempts if attempts is not None else settings.trigger_retry_attempts
        self.initial_delay = (
            initial_delay if initial_delay is not None else settings.trigger_retry_initial_seconds
        )
        self.max_delay = max_delay if max_delay is not None else settings.trigger_retry_max_seconds
        self.sleep = sleep

    def headers(self) -> dict[str, str]:
        """The headers this client sends: X-Run-Id inside a run scope."""
        run_id = get_run_id()
        return {RUN_ID_HEADER: run_id} if run_id else {}

    def call(self, send: Callable[..., T], request: Any) -> T:
        """Send ``request`` with ``send`` (a trigger function), retrying retryable errors."""
        run_id = self.headers().get(RUN_ID_HEADER)
        delays = retry_delays(attempts=self.attempts, initial=self.initial_delay, maximum=self.max_delay)
        for attempt in range(1, self.attempts + 1):
            try:
                return send(request, publisher=self.publisher, settings=self.settings, run_id=run_id)
            except Exception as exc:
                if not is_retryable(exc) or attempt == self.attempts:
                    raise
                delay = delays[attempt - 1]
                logger.warning(
                    "trigger attempt %s/%s failed, retrying in %ss: run_id=%s: %s",
                    attempt,
                    self.attempts,
                    delay,
                    run_id,
                    exc,
                )
                self.sleep(delay)
        raise AssertionError("unreachable")

    def send(self, request: TriggerRequest) -> TriggerResult:
        """Send a request of any declared trigger queue (found by its request model)."""
        return self.call(sender_of(queue_of_request(type(request))), request)

    # Conveniences of the three queues for existing callers; a new queue needs none: ``send``.

    def lineup(self, request: LineupRequest) -> TriggerResult:
        """``send`` to lineup_updates."""
        return self.call(trigger_lineup, request)

    def waiver(self, request: WaiverRequest) -> TriggerResult:
        """``send`` to waiver_actions."""
        return self.call(trigger_waiver, request)

    def draft_pick(self, request: DraftPickRequest) -> TriggerResult:
        """``send`` to draft_targets."""
        return self.call(trigger_draft_pick, request)
