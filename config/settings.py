"""Settings classes: BaseEnvironment for every process, MatchListenerEnvironment for listeners.

Precedence, strongest first: keyword arguments > process environment > ``.env`` at the
repository root > field defaults. Variable names are the field names upper-cased, no prefix.
Settings are read once at process start and passed down explicitly.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_FILE = REPO_ROOT / ".env"


class AppEnv(StrEnum):
    """Where a deployment runs; decides which periodic jobs the scheduler sends."""

    DEVELOP = "develop"  # a developer's machine: only is_test matches are auto-dispatched
    STAGING = "staging"  # pre-production: live and test matches, every periodic job
    PRODUCTION = "production"  # live service: live and test matches, every periodic job


def mask_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (for messages and logs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


class BaseEnvironment(BaseSettings):
    """Settings shared by every kickoff process."""

    model_config = SettingsConfigDict(
        env_file=ENV_FILE,
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        validate_default=True,
    )

    database_url: str = Field(
        "postgresql://postgres@127.0.0.1:5432/kickoff",
        description="PostgreSQL database of matches, listener rows, outbox and run_log.",
    )
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Redis for locks, pending keys, stop flags and attempt counters.",
    )
    redis_key_prefix: str = Field(
        "kickoff:", description="Prefix of every lock and barrier key kickoff writes in Redis."
    )
    broker_url: str = Field("redis://127.0.0.1:6379/2", description="Redis database of the Dramatiq broker.")
    broker_namespace: str = Field("dramatiq", description="Key namespace of the Dramatiq Redis broker.")
    amqp_url: str = Field(
        "amqp://guest:guest@127.0.0.1:5672/%2F",
        description="RabbitMQ that receives outbox, trade, alert and job_runs messages.",
    )
    app_env: AppEnv = Field(
        AppEnv.DEVELOP, description="develop | staging | production: selects the schedule."
    )
    data_dir: Path = Field(
        Path("data"), description="Root of listener archives and logs ({data_dir}/listener/...)."
    )
    sportradar_base_url: str = Field(
        "http://127.0.0.1:8765",
        description="Base URL of the feed's push and schedule API (srsim locally).",
    )
    sportradar_api_key: SecretStr = Field(
        SecretStr(""), description="API key of the feed; secret, never logged or printed."
    )
    log_level: str = Field("INFO", description="Log level of kickoff's loggers.")

    # -- publisher (outbox, triggers, drain) -------------------------------------

    # -- job runs (catalog, launcher) ---------------------------------------------

    def describe(self) -> dict[str, Any]:
        """Return the settings as a printable dict: secrets and URL passwords masked."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = "***" if value.get_secret_value() else ""
            elif name.endswith("_url") and isinstance(value, str):
                value = mask_url(value)
            elif isinstance(value, (Path, StrEnum)):
                value = str(value)
            out[name] = value
        return out


class MatchListenerEnvironment(BaseEnvironment):
    """Settings of one match listener: the ``listener_*`` fields and every interval."""

    listener_dry_run: bool = Field(
        False, description="Write no lifecycle rows (is_test matches still write them)."
    )
    listener_force_exit_code: int | None = Field(
        None, description="Exit with this code before any stream work (ops testing)."
    )
    listener_sr_url_league: str = Field(
        "nfl", description="League segment of the push URL; injected from Match.league."
    )
    listener_sr_request_match_uuid: str | None = Field(
        None, description="Sportradar match id to follow; injected from Match.sr_id."
    )
    listener_sr_env: str = Field("trial", description="Access level segment of the feed URL.")
    listener_skip_processing: bool = Field(
        False, description="Record events only; do not run the processing pipeline."
    )
    listener_body: str = Field(
        "listener.match_listener:MatchListener",
        description="Dotted path (module:attr) of the listener body class (listener.body).",
    )
    listener_pipeline: str = Field(
        "listener.pipeline:QuestionPipeline",
        description="Dotted path (module:attr) of the event processing pipeline.",
    )
    listener_heartbeat_interval_seconds: float = Field(
        30.0, gt=0, description="How often a listener writes heartbeat_at on its row."
    )
    listener_heartbeat_stale_seconds: float = Field(
        180.0, ge=0, description="A heartbeat older than this is Stale, then Abandoned (14)."
    )
    listener_stop_poll_seconds: float = Field(
        1.0, gt=0, description="How often a worker polls Redis for operator stop flags."
    )
    listener_max_consecutive_heartbeats: int = Field(
        360, gt=0, description="Exit 10 after this many stream heartbeats with no event."
    )
    listener_status_reload_heartbeats: int = Field(
        50, gt=0, description="Reload Match.status every this many idle stream heartbeats."
    )
    listener_active_max_age_seconds: float = Field(
        12 * 3600.0, gt=0, description="Dispatch window before now; open rows older are not active."
    )
    listener_start_attempt_cap: int = Field(
        15, gt=0, description="Failed starts before a match is exhausted and skipped."
    )
    listener_start_attempts_ttl_seconds: float = Field(
        12 * 3600.0, gt=0, description="Lifetime of the failed-start counter."
    )
    listener_connect_timeout_seconds: float = Field(
        10.0, gt=0, description="Connect timeout of the push stream."
    )
    listener_read_timeout_seconds: float = Field(
        30.0, gt=0, description="Read timeout of the push stream (heartbeats come every 5 s)."
    )

    # -- lifecycle (dispatch, start, stop, sweep) ---------------------------------

    # -- stream, archive, simulator -----------------------------------------------


def env_example() -> str:
    """Return the text of ``.env.example``: every field, its default and its meaning."""
    lines = [
        "# kickoff settings. Copy to .env at the repository root and edit.",
        "# Precedence: keyword arguments > process environment > .env > these defaults.",
        "",
    ]
    for cls in (BaseEnvironment, MatchListenerEnvironment):
        fields = cls.model_fields
        own = [n for n in fields if cls is BaseEnvironment or n not in BaseEnvironment.model_fields]
        lines.append(f"# --- {cls.__name__} ---")
        for name in own:
            info = fields[name]
            default = info.default
            if isinstance(default, SecretStr) or default is None:
                default = ""
            elif isinstance(default, StrEnum):
                default = default.value
            lines.append(f"# {info.description}")
            lines.append(f"{name.upper()}={default}")
        lines.append("")
    return "\n".join(lines)


def load_settings(**overrides: Any) -> BaseEnvironment:
    """Read BaseEnvironment once at process start; keyword arguments win over everything."""
    return BaseEnvironment(**overrides)


def load_listener_settings(**overrides: Any) -> MatchListenerEnvironment:
    """Read MatchListenerEnvironment once; keyword arguments win over everything."""
    return MatchListenerEnvironment(**overrides)
