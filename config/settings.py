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

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from config.errors import ConfigurationError

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_FILE = REPO_ROOT / ".env"


class AppEnv(StrEnum):
    """Where a deployment runs; decides which periodic jobs the scheduler sends."""

    DEVELOP = "develop"  # a developer's machine: only is_test matches are auto-dispatched
    STAGING = "staging"  # pre-production: live and test matches, every periodic job
    PRODUCTION = "production"  # live service: live and test matches, every periodic job


class LogFormat(StrEnum):
    """How log lines are written (config.log)."""

    TEXT = "text"  # one readable line per record
    JSON = "json"  # one JSON object per line


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


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: The URL schemes each service setting accepts.
URL_SCHEMES: dict[str, tuple[str, ...]] = {
    "database_url": ("postgresql", "postgres"),
    "redis_url": ("redis", "rediss", "unix"),
    "broker_url": ("redis", "rediss", "unix", "amqp", "amqps"),
    "amqp_url": ("amqp", "amqps"),
}


def check_url_scheme(url: str, schemes: tuple[str, ...]) -> None:
    """Raise ValueError unless ``url`` is ``scheme://...`` with one of ``schemes`` and a host or path."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"not a URL: {exc}") from exc
    if parts.scheme.lower() not in schemes or not (parts.netloc or parts.path):
        wanted = " or ".join(f"{s}://" for s in schemes if s in ("redis", "amqp")) or f"{schemes[0]}://"
        raise ValueError(f"expected a {wanted} URL, got {mask_url(url)!r}")


class BaseEnvironment(BaseSettings):
    """Settings shared by every kickoff process."""

    model_config = SettingsConfigDict(
        env_file=ENV_FILE,
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        validate_default=True,
        # ``NAME=`` (as .env.example writes an unset optional setting) means unset: the default.
        env_ignore_empty=True,
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
    broker_url: str = Field(
        "redis://127.0.0.1:6379/2",
        description=(
            "Dramatiq broker: redis:// selects the Redis broker (a database of its own),"
            " amqp:// the RabbitMQ broker (a vhost of its own)."
        ),
    )
    broker_namespace: str = Field(
        "dramatiq", description="Key namespace of the Dramatiq Redis broker (redis:// BROKER_URL only)."
    )
    broker_quorum_queues: bool = Field(
        False,
        description=(
            "RabbitMQ broker: declare match_listeners (and its delay queue) as a quorum queue"
            " (replicated; takes effect when the queue is first declared)."
        ),
    )
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
    sentry_dsn: SecretStr = Field(
        SecretStr(""),
        description="Sentry DSN of failure reports (one event per failed listener attempt); empty: none.",
    )
    log_level: str = Field(
        "INFO", description="Log level of kickoff's loggers: DEBUG | INFO | WARNING | ERROR | CRITICAL."
    )
    log_format: LogFormat = Field(
        LogFormat.TEXT, description="text | json: json prints one JSON object per log line."
    )
    database_connect_timeout_seconds: float = Field(
        10.0, ge=0, description="PostgreSQL connect timeout (0: none)."
    )
    database_statement_timeout_seconds: float = Field(
        60.0, ge=0, description="PostgreSQL statement_timeout of every kickoff connection (0: none)."
    )
    database_pool_max_connections: int | None = Field(
        None,
        ge=0,
        description=(
            "PostgreSQL connections one worker process keeps and reuses at most (starts, heartbeats,"
            " queries); unset: LISTENER_DB_CONCURRENCY + 2, at least 10; 0: no pool (a connection per"
            " use). Give a process whose threads use the database at once more than that a larger pool."
        ),
    )
    database_pool_max_age_seconds: float = Field(
        60.0, gt=0, description="A pooled PostgreSQL connection is closed once this old (idle ones first)."
    )

    # -- publisher (outbox, triggers, drain) -------------------------------------
    amqp_confirm_timeout_seconds: float = Field(
        10.0, gt=0, description="How long a publish waits for the broker's confirms before it is uncertain."
    )
    amqp_connect_timeout_seconds: float = Field(
        5.0, gt=0, description="Socket connect timeout of the RabbitMQ publisher."
    )
    activity_dependency_hold_seconds: float = Field(
        3600.0, gt=0, description="How long a chained waiver claim waits for its parent IR move."
    )
    activity_parent_read_timeout_seconds: float = Field(
        2.0, gt=0, description="How long reading a chained claim's parent may wait before it is unreadable."
    )
    idempotency_ttl_lineup_seconds: float = Field(
        1800.0,
        ge=0,
        description="Key release TTL of lineup_updates (a finished action's key is reusable after).",
    )
    idempotency_ttl_waiver_seconds: float = Field(
        7 * 86400.0, ge=0, description="Key release TTL of waiver_actions."
    )
    idempotency_ttl_draft_seconds: float = Field(900.0, ge=0, description="Key release TTL of draft_targets.")
    draft_target_default_expiry_seconds: float = Field(
        600.0,
        gt=0,
        description=(
            "A draft target sent without expires_at expires this long after it was saved "
            "(the drain never delivers it later)."
        ),
    )
    action_result_timeout_seconds: float = Field(
        86400.0,
        gt=0,
        description="A delivered action with no result reported this long after delivery fails (unreported).",
    )
    players_source: str = Field(
        "{base_url}/players/nfl",
        description=(
            "Players map for player sync: an http(s) URL or a file; {base_url} is SPORTRADAR_BASE_URL"
            " (the simulator serves one)."
        ),
    )
    outbox_immediate_grace_seconds: float = Field(
        30.0, ge=0, description="The drain leaves a fresh row this long to the trigger's own publish."
    )
    outbox_batch_size: int = Field(
        500, gt=0, description="Outbox rows the drain claims and publishes per batch."
    )
    outbox_max_attempts: int = Field(
        12,
        gt=0,
        description=(
            "Refusals of one outbox message by the broker (nack, unroutable) before it is marked "
            "dead; an unreachable broker or a lost confirm never counts."
        ),
    )
    outbox_backoff_base_seconds: float = Field(
        5.0, gt=0, description="First retry delay of a failed outbox row; doubles per try."
    )
    outbox_backoff_max_seconds: float = Field(
        900.0, gt=0, description="Longest retry delay of a failed outbox row."
    )
    outbox_drain_workers: int = Field(
        2,
        gt=0,
        description=(
            "Drains run side by side by one drain run, each with its own AMQP and database connection"
            " (SKIP LOCKED keeps their batches apart); one encodes while another waits for confirms."
        ),
    )
    outbox_drain_max_seconds: float = Field(
        50.0, gt=0, description="Longest one drain run (periodic actor, CLI) keeps publishing."
    )
    trigger_retry_attempts: int = Field(
        6, gt=0, description="trigger_client: attempts for connection errors, timeouts and 5xx-like errors."
    )
    trigger_retry_initial_seconds: float = Field(
        5.0, ge=0, description="trigger_client: first retry delay (doubles per attempt)."
    )
    trigger_retry_max_seconds: float = Field(30.0, ge=0, description="trigger_client: longest retry delay.")

    # -- HTTP API (kickoff serve) --------------------------------------------------
    api_host: str = Field("127.0.0.1", description="Address `kickoff serve` binds.")
    api_port: int = Field(8080, ge=0, le=65535, description="Port `kickoff serve` binds.")
    api_workers: int = Field(1, gt=0, description="uvicorn worker processes of `kickoff serve`.")
    api_max_body_bytes: int = Field(
        65536, gt=0, description="Largest request body the API accepts (larger: 413)."
    )
    api_key_cache_seconds: float = Field(
        2.0,
        ge=0,
        description="A key that authenticated is trusted this long without asking PostgreSQL again;"
        " a revoked key is refused at the latest this long after `kickoff apikeys revoke` (0: at once).",
    )
    api_metrics_require_key: bool = Field(
        False, description="GET /metrics needs an API key (read scope or wider); off: open, as /healthz."
    )
    console_cookie_secure: bool = Field(
        False,
        description="The console's session cookie is sent only over HTTPS (Secure); turn on behind TLS.",
    )
    console_board_refresh_seconds: float = Field(
        1.0, gt=0, description="How often the console's live board reads the board anew (server-sent events)."
    )
    console_session_hours: float = Field(
        12.0, gt=0, description="A console sign-in lasts this long (revoking its API key ends it at once)."
    )
    dramatiq_prometheus: bool = Field(
        False,
        description=(
            "Dramatiq workers add Dramatiq's Prometheus middleware (exposition on dramatiq_prom_port,"
            " default 9191; one port per worker command)."
        ),
    )

    # -- job runs (catalog, launcher) ---------------------------------------------
    job_catalog_path: Path = Field(
        Path("runs/catalog.yaml"),
        description=(
            "YAML file declaring the jobs publish_run accepts and the launcher starts"
            " (a relative path is taken from the kickoff source root)."
        ),
    )
    launcher_cap: int = Field(4, gt=0, description="Most job processes one launcher runs at once.")
    launcher_prefetch: int = Field(
        100, gt=0, description="Unacked job_runs deliveries RabbitMQ may hand one launcher at once."
    )
    launcher_poll_seconds: float = Field(
        0.05, gt=0, description="Launcher loop tick: how often it reaps, starts and reads the broker."
    )
    launcher_drain_interval_seconds: float = Field(
        5.0, gt=0, description="How often the launcher loop calls drain_job_runs."
    )
    launcher_rescan_interval_seconds: float = Field(
        30.0, gt=0, description="How often the launcher re-reads queued run_log rows into its list."
    )
    launcher_claim_grace_seconds: float = Field(
        30.0, gt=0, description="A claimed run with no pid after this long never started; requeue it."
    )
    launcher_shutdown_grace_seconds: float = Field(
        30.0, ge=0, description="On SIGTERM, wait this long for running jobs before exiting."
    )
    job_run_drain_batch: int = Field(100, gt=0, description="Outbox rows drain_job_runs sends per call.")

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {value!r} (one of {', '.join(LOG_LEVELS)})")
        return level

    @field_validator("database_url", "redis_url", "broker_url", "amqp_url")
    @classmethod
    def _known_url_scheme(cls, value: str, info: ValidationInfo) -> str:
        check_url_scheme(value, URL_SCHEMES[info.field_name or ""])
        return value

    @field_validator("job_catalog_path")
    @classmethod
    def _catalog_from_source_root(cls, value: Path) -> Path:
        return value if value.is_absolute() else REPO_ROOT / value

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
    listener_dispatch_within_minutes: int = Field(
        10, ge=0, description="Dispatch window after now for pre-game matches (minutes)."
    )
    listener_stop_flag_ttl_seconds: float = Field(
        300.0, gt=0, description="Lifetime of an operator stop flag; starts in flight are skipped meanwhile."
    )
    listener_lock_loss_grace_seconds: float = Field(
        2.0,
        ge=0,
        description="A listener that cannot extend its start lock stops this long before the lock expires.",
    )
    listener_worker_lease_seconds: float = Field(
        20.0,
        gt=0,
        description=(
            "Lease of a listener worker process in Redis, renewed every quarter of it: a worker that"
            " cannot renew stops its listeners, and a dead worker's matches start again once it lapses."
        ),
    )
    listener_test_duration_seconds: float | None = Field(
        None, description="Scripted test listener: run this long, then exit (empty: until stopped)."
    )
    listener_test_exit_code: int = Field(0, description="Scripted test listener: exit code it returns.")
    listener_test_hang: bool = Field(
        False, description="Scripted test listener: ignore request_stop (a hung body)."
    )
    broker_heartbeat_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description=(
            "Dramatiq broker: a worker silent this long is dead and its messages requeue"
            " (RabbitMQ: the AMQP heartbeat is half of it)."
        ),
    )
    broker_maintenance_chance: int = Field(
        1000, ge=0, description="Dramatiq Redis broker: commands per million that run queue maintenance."
    )
    worker_presence_ttl_seconds: float = Field(
        30.0,
        gt=0,
        description="A worker process not seen on its queues this long is not alive (kickoff check).",
    )
    scheduler_alive_seconds: float = Field(
        150.0,
        gt=0,
        description="kickoff check: the scheduler is alive when it claimed a tick slot this recently.",
    )
    periodic_skip_delay_seconds: float = Field(
        30.0, gt=0, description="A scheduled tick older than this when a worker takes it is skipped."
    )
    scheduler_tick_ttl_seconds: float = Field(
        3600.0, gt=0, description="Lifetime of the per-slot key that stops a tick being sent twice."
    )

    # -- stream, archive, simulator -----------------------------------------------
    listener_stream_format: str = Field(
        "sse", description="Framing to ask the feed for: sse | ndjson (the response content type decides)."
    )
    listener_stream_path: str = Field(
        "/{league}/{access}/stream/en/events/subscribe",
        description="Path of the push stream under SPORTRADAR_BASE_URL ({league}, {access} filled in).",
    )
    listener_reconnect_attempts: int = Field(
        5, ge=0, description="Reconnects after a dropped stream before giving up (exit 12)."
    )
    listener_reconnect_backoff_seconds: float = Field(
        1.0, ge=0, description="First reconnect delay; doubles per failed attempt."
    )
    listener_reconnect_backoff_max_seconds: float = Field(
        30.0, ge=0, description="Longest delay between two reconnect attempts."
    )
    listener_reconnect_reset_seconds: float = Field(
        60.0, ge=0, description="A stream connection that lasted this long resets the reconnect count."
    )
    listener_max_line_bytes: int = Field(
        1_048_576, gt=0, description="A stream line longer than this is skipped (logged)."
    )
    listener_max_bad_lines: int = Field(
        20, gt=0, description="Consecutive unreadable stream lines (bad JSON, oversize) before exit 11."
    )
    listener_archive_flush_events: int = Field(
        1,
        gt=0,
        description=(
            "Write the event archive after this many buffered events (1: every event reaches the OS at"
            " once, so a kill -9 loses at most a partial last event; raise it for bulk replays)."
        ),
    )
    listener_archive_flush_seconds: float = Field(
        0.5, ge=0, description="Flush the event archive when its oldest buffered event is this old."
    )
    listener_db_concurrency: int = Field(
        8,
        gt=0,
        # LISTENER_DB_SLOTS_PER_PROCESS is the older name of the starts' half of this limit.
        validation_alias=AliasChoices("listener_db_concurrency", "listener_db_slots_per_process"),
        description=(
            "Listener work of one process talking to PostgreSQL at once: starts, shutdown writes and"
            " the listeners' own queries (LISTENER_DB_SLOTS_PER_PROCESS is still read as this)."
        ),
    )
    schedule_access: str = Field("trial", description="Access level segment of the schedule API paths.")
    schedule_daily_leagues: str = Field(
        "mlb,nhl", description="Leagues whose schedule is refreshed daily (comma-separated)."
    )
    schedule_weekly_leagues: str = Field(
        "nfl", description="Leagues whose schedule is refreshed weekly (comma-separated)."
    )
    schedule_timeout_seconds: float = Field(10.0, gt=0, description="HTTP timeout of schedule API calls.")
    srsim_host: str = Field("127.0.0.1", description="Address `kickoff sim serve` binds.")
    srsim_port: int = Field(8765, ge=0, description="Port `kickoff sim serve` binds (0: any free port).")
    srsim_speed: float = Field(1.0, gt=0, description="Simulator speed factor: 10 plays a game 10x faster.")
    srsim_watch_seconds: float = Field(
        1.0, gt=0, description="How often `kickoff sim serve` looks for new scripts in DATA_DIR/srsim."
    )
    srsim_heartbeat_seconds: float = Field(
        5.0, gt=0, description="Script seconds between two stream heartbeats (divided by the speed)."
    )


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


def describe_settings_error(exc: ValidationError) -> str:
    """One line naming the first invalid setting (as its environment variable) and why."""
    first = exc.errors()[0]
    name = ".".join(str(p) for p in first.get("loc", ())) or "?"
    msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"invalid setting {name.upper()}: {msg}{more}"


def load_settings(**overrides: Any) -> BaseEnvironment:
    """Read BaseEnvironment once at process start; keyword arguments win over everything.

    An invalid value raises ConfigurationError naming the setting (one line).
    """
    try:
        return BaseEnvironment(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(describe_settings_error(exc)) from exc


def load_listener_settings(**overrides: Any) -> MatchListenerEnvironment:
    """Read MatchListenerEnvironment once; keyword arguments win over everything (see load_settings)."""
    try:
        return MatchListenerEnvironment(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(describe_settings_error(exc)) from exc
