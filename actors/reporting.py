"""Failure reports: sentry-sdk with its Dramatiq integration when SENTRY_DSN is set, else nothing.

Every failed Dramatiq message becomes one event (the integration captures the exception the
actor raised). A failed listener attempt is fingerprinted by the internal match id, so all 15
attempts of one match group into one issue, and tagged with ``sr_id``, ``exit_code`` and
``attempt``. Log records are breadcrumbs only, never events or Sentry logs of their own, so one
attempt is one event. Every string of an event that contains the provider API key has it replaced
before the event leaves the process.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import sentry_sdk
from sentry_sdk.integrations.dramatiq import DramatiqIntegration
from sentry_sdk.integrations.logging import LoggingIntegration

from config.settings import KickoffSettings

logger = logging.getLogger(__name__)

FILTERED = "[Filtered]"
_init_lock = threading.Lock()
_initialised = False


def scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with every occurrence of each secret in any string (keys too) replaced."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, FILTERED)
        return value
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    return value


def init_reporting(settings: KickoffSettings) -> bool:
    """Start sentry-sdk for this process if SENTRY_DSN is set; True when reports are sent.

    Call before the Dramatiq broker is built: the integration adds its middleware to brokers
    created afterwards. Without a DSN sentry-sdk is never initialised, so nothing is sent.
    """
    global _initialised
    dsn = settings.sentry_dsn.get_secret_value()
    if not dsn:
        return False
    secrets = tuple(s for s in (settings.sportradar_api_key.get_secret_value(),) if s)

    def before_send(event: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
        return scrub(event, secrets) if secrets else event

    with _init_lock:
        if _initialised:
            return True
        sentry_sdk.init(
            dsn=dsn,
            environment=str(settings.app_env),
            # log records: breadcrumbs only (sentry-sdk 3's ``level`` would ship each as a Sentry log)
            integrations=[DramatiqIntegration(), LoggingIntegration(level=None, event_level=None)],
            before_send=before_send,
            data_collection={"user_info": False},  # no user identity, the old send_default_pii=False
        )
        _initialised = True
    logger.info("failure reports enabled (environment %s)", settings.app_env)
    return True


def tag_listener_start(match_id: str) -> None:
    """Fingerprint whatever this start message reports by the internal match id."""
    if not sentry_sdk.get_client().is_active():
        return
    scope = sentry_sdk.get_isolation_scope()
    scope.fingerprint = ["start_match_listener", match_id]
    scope.set_tag("match_id", match_id)


def tag_failed_attempt(
    *, sr_id: str | None, exit_code: int | None, attempt: int | None, match: str | None = None
) -> None:
    """Tag the failed attempt this message is about to report (None: not known); ``match`` is its
    title and league, "HOU @ KC (mlb)"."""
    if not sentry_sdk.get_client().is_active():
        return
    scope = sentry_sdk.get_isolation_scope()
    for key, value in (("sr_id", sr_id), ("exit_code", exit_code), ("attempt", attempt), ("match", match)):
        if value is not None:
            scope.set_tag(key, str(value))
