"""Settings classes: KickoffSettings for every process, MatchListenerEnvironment for a listener run.

Precedence, strongest first: keyword arguments > process environment > ``.env`` at the
repository root > field defaults. Variable names are the field names upper-cased, no prefix.
Settings are read once at process start and passed down explicitly.

KickoffSettings (``load_settings``) holds everything a process that does not run a listener reads,
the listener *lifecycle* settings included: the thresholds every process that starts, stops or judges
listeners shares (dispatch window, heartbeat staleness, worker lease, stop flag TTL, start attempt
cap) and the play-by-play access an archive verification needs. The API and console, the CLI's
context and the scheduler read KickoffSettings.

MatchListenerEnvironment (``load_listener_settings``) adds the fields only a running listener reads
(its body and pipeline, stream, backfill, reconnect, archive flush, the worker runtime's polls and
hand-off, dry run and test knobs). It is built where a listener runs: ``kickoff listen``, a run's own
settings (``lifecycle.listener_run.resolve_listener_environment``), and a worker that consumes
``match_listeners``, when it boots (``actors.actor_runtime.listener_settings``: ``listener_settings_of`` the
runtime's KickoffSettings). The actor runtime of every other process (the API, the CLI's senders, the
scheduler, a ``default``-queue worker) holds KickoffSettings only, so a bad listener-only value never
stops it.
"""

from __future__ import annotations

import re
from enum import StrEnum
from ipaddress import ip_network
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from pydantic import (
    AliasChoices,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from config.errors import ConfigurationError

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_FILE = REPO_ROOT / ".env"


class AppEnv(StrEnum):
    """Where a deployment runs; decides which periodic jobs the scheduler sends."""

    DEVELOP = "develop"  # a developer's machine: only is_test matches are auto-dispatched
    STAGING = "staging"  # pre-production: live and test matches, every periodic job
    PRODUCTION = "production"  # live service: live and test matches, every periodic job

    @property
    def automatic_is_test(self) -> bool | None:
        """The is_test filter of every start kickoff sends by itself (the periodic dispatch, the
        reaper's and the sweep's restarts, a shutdown's hand-off, a reconnect restart): develop
        starts test clones only (True), elsewhere live and test matches alike (None)."""
        return True if self is AppEnv.DEVELOP else None


class LogFormat(StrEnum):
    """How log lines are written (config.log)."""

    TEXT = "text"  # one readable line per record
    JSON = "json"  # one JSON object per line


#: A query parameter whose name holds one of these (any case) has a secret value: masked.
SECRET_PARAM_WORDS = ("pass", "pwd", "token", "key", "secret", "auth", "credential", "signature")


def _masked_query(query: str) -> str:
    items = []
    for item in query.split("&"):
        name, sep, value = item.partition("=")
        secret = sep and value and any(word in unquote_plus(name).lower() for word in SECRET_PARAM_WORDS)
        items.append(f"{name}=***" if secret else item)
    return "&".join(items)


def mask_url(url: str) -> str:
    """Return ``url`` with any password and secret query value (``?password=``, ``?api_key=``...) as ``***``.

    The one masking function of messages, logs, error answers and ``kickoff config show``.
    """
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable url>"
    if password is not None:
        netloc = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{netloc}")
    if parts.query:
        parts = parts._replace(query=_masked_query(parts.query))
    return urlunsplit(parts)


#: A URL inside a sentence (the trailing ``:`` of ``...%2F: reason`` is not part of it).
URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+?(?=:?(?:\s|$))")


def mask_urls_in(text: str) -> str:
    """``text`` with every URL in it passed through ``mask_url`` (log lines, exception texts)."""
    if "://" not in text:
        return text
    return URL_IN_TEXT.sub(lambda found: mask_url(found.group(0)), text)


def mask_urls_deep(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, text) with every URL in every text masked (``mask_urls_in``)."""
    if isinstance(value, str):
        return mask_urls_in(value)
    if isinstance(value, dict):
        return {k: mask_urls_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_urls_deep(v) for v in value]
    return value


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: The URL schemes each service setting accepts.
URL_SCHEMES: dict[str, tuple[str, ...]] = {
    "database_url": ("postgresql", "postgres"),
    "database_owner_url": ("postgresql", "postgres"),
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


class KickoffSettings(BaseSettings):
    """Every kickoff process's settings: services, publisher, API and console, job runs, workers and
    scheduler, listener lifecycle and play-by-play access, schedule API, simulator. Everything but the
    ``listener_*`` settings only a running listener reads (MatchListenerEnvironment's own)."""

    model_config = SettingsConfigDict(
        env_file=ENV_FILE,
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        validate_default=True,
        # ``NAME=`` (as .env.example writes an unset optional setting) means unset: the default.
        env_ignore_empty=True,
        # Each field's docstring is its description (.env.example, --help texts).
        use_attribute_docstrings=True,
    )

    database_url: str = "postgresql://postgres@127.0.0.1:5432/kickoff"
    """PostgreSQL database of matches, listeners, outbox and run_log, as the app role (docs/lifecycle.md)."""
    database_owner_url: str | None = None
    """The same database as its owner's role: `kickoff db migrate` runs the migrations with it and creates or
    updates DATABASE_URL's role, which may only INSERT and SELECT the audit log (unset: DATABASE_URL migrates,
    one role)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis for locks, pending keys, stop flags and attempt counters."""
    redis_key_prefix: str = "kickoff:"
    """Prefix of every lock and barrier key kickoff writes in Redis."""
    broker_url: str = "redis://127.0.0.1:6379/2"
    """Dramatiq broker: redis:// selects the Redis broker (a database of its own), amqp:// the RabbitMQ broker
    (a vhost of its own)."""
    broker_namespace: str = "dramatiq"
    """Key namespace of the Dramatiq Redis broker (redis:// BROKER_URL only)."""
    broker_quorum_queues: bool = False
    """RabbitMQ broker: declare match_listeners (and its delay queue) as a quorum queue (replicated; takes
    effect when the queue is first declared)."""
    broker_heartbeat_timeout_seconds: PositiveFloat = 60.0
    """Dramatiq broker: a worker silent this long is dead and its messages requeue (RabbitMQ: the AMQP
    heartbeat is half of it)."""
    broker_maintenance_chance: NonNegativeInt = 1000
    """Dramatiq Redis broker: commands per million that run queue maintenance."""
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/%2F"
    """RabbitMQ that receives outbox, trade, alert and job_runs messages."""
    app_env: AppEnv = AppEnv.DEVELOP
    """develop | staging | production: selects the schedule."""
    data_dir: Path = Path("data")
    """Root of listener archives and logs ({data_dir}/listener/...)."""
    sportradar_base_url: str = "http://127.0.0.1:8765"
    """Base URL of the feed's push and schedule API (srsim locally)."""
    sportradar_api_key: SecretStr = SecretStr("")
    """API key of the feed; secret, never logged or printed."""
    sentry_dsn: SecretStr = SecretStr("")
    """Sentry DSN of failure reports (one event per failed listener attempt); empty: none."""
    log_level: str = "INFO"
    """Log level of kickoff's loggers: DEBUG | INFO | WARNING | ERROR | CRITICAL."""
    log_format: LogFormat = LogFormat.TEXT
    """text | json: json prints one JSON object per log line."""
    trace_url_template: str = ""
    """The console links a trace id to this URL with ``{trace_id}`` replaced (e.g.
    http://localhost:16686/trace/{trace_id} for a local Jaeger); empty: the id is shown unlinked. Where
    spans go is OpenTelemetry's OTEL_* variables (docs/tracing.md)."""
    database_connect_timeout_seconds: NonNegativeFloat = 10.0
    """PostgreSQL connect timeout (0: none)."""
    database_statement_timeout_seconds: NonNegativeFloat = 60.0
    """PostgreSQL statement_timeout of every kickoff connection (0: none). A statement still unanswered
    this long plus DATABASE_CONNECT_TIMEOUT_SECONDS after it was sent (a link that stopped answering)
    fails on the client side too: its connection is shut and the call raises DatabaseUnavailable."""
    database_pool_max_connections: NonNegativeInt | None = None
    """PostgreSQL connections one worker process keeps and reuses at most (starts, heartbeats, queries);
    unset: LISTENER_DB_CONCURRENCY + 2, at least 10; 0: no pool (a connection per use). Give a process whose
    threads use the database at once more than that a larger pool. An API process (kickoff serve) runs at
    most this many request threads (unset: 40, 0: 40 without a pool)."""
    database_pool_max_age_seconds: PositiveFloat = 60.0
    """A pooled PostgreSQL connection is closed once this old (idle ones first)."""

    # -- publisher (outbox, triggers, drain) -------------------------------------
    amqp_confirm_timeout_seconds: PositiveFloat = 10.0
    """How long a publish waits for the broker's confirms before it is uncertain."""
    amqp_connect_timeout_seconds: PositiveFloat = 5.0
    """Socket connect timeout of the RabbitMQ publisher."""
    activity_dependency_hold_seconds: PositiveFloat = 3600.0
    """How long a chained waiver claim waits for its parent IR move."""
    activity_parent_read_timeout_seconds: PositiveFloat = 2.0
    """How long reading a chained claim's parent may wait before it is unreadable."""
    idempotency_ttl_lineup_seconds: NonNegativeFloat = 1800.0
    """Key release TTL of lineup_updates (a finished action's key is reusable after)."""
    idempotency_ttl_waiver_seconds: NonNegativeFloat = 7 * 86400.0
    """Key release TTL of waiver_actions."""
    idempotency_ttl_draft_seconds: NonNegativeFloat = 900.0
    """Key release TTL of draft_targets."""
    draft_target_default_expiry_seconds: PositiveFloat = 600.0
    """A draft target sent without expires_at expires this long after it was saved (the drain never delivers
    it later)."""
    action_result_timeout_seconds: PositiveFloat = 86400.0
    """A delivered action with no result reported this long after delivery fails (unreported)."""
    players_source: str = "{base_url}/players/{league}"
    """Players map for player sync: an http(s) URL or a file; {base_url} is SPORTRADAR_BASE_URL (the simulator
    serves one), {league} the players' league (models.leagues.PLAYERS)."""
    outbox_immediate_grace_seconds: NonNegativeFloat = 30.0
    """The drain leaves a fresh row this long to the trigger's own publish."""
    outbox_batch_size: PositiveInt = 2000
    """Outbox rows the drain claims and publishes per batch (one transaction, one wait for the
    batch's confirms: larger batches wait less often)."""
    outbox_max_attempts: PositiveInt = 12
    """Refusals of one outbox message by the broker (nack, unroutable) before it is marked dead; an
    unreachable broker or a lost confirm never counts."""
    outbox_backoff_base_seconds: PositiveFloat = 5.0
    """First retry delay of a failed outbox row; doubles per try."""
    outbox_backoff_max_seconds: PositiveFloat = 900.0
    """Longest retry delay of a failed outbox row."""
    outbox_drain_workers: PositiveInt = 2
    """Drains run side by side by one drain run, each with its own AMQP and database connection (SKIP LOCKED
    keeps their batches apart); one encodes while another waits for confirms."""
    outbox_drain_max_seconds: PositiveFloat = 50.0
    """Longest one drain run (periodic actor, CLI) keeps publishing."""
    trigger_retry_attempts: PositiveInt = 6
    """trigger_client: attempts for connection errors, timeouts and 5xx-like errors."""
    trigger_retry_initial_seconds: NonNegativeFloat = 5.0
    """trigger_client: first retry delay (doubles per attempt)."""
    trigger_retry_max_seconds: NonNegativeFloat = 30.0
    """trigger_client: longest retry delay."""

    # -- HTTP API (kickoff serve) --------------------------------------------------
    api_host: str = "127.0.0.1"
    """Address `kickoff serve` binds."""
    api_port: int = Field(8080, ge=0, le=65535)
    """Port `kickoff serve` binds."""
    api_workers: PositiveInt = 1
    """uvicorn worker processes of `kickoff serve`."""
    api_max_body_bytes: PositiveInt = 65536
    """Largest request body the API accepts (larger: 413)."""
    api_key_cache_seconds: NonNegativeFloat = 2.0
    """A key that authenticated is trusted this long without asking PostgreSQL again; a revoked key is refused
    at the latest this long after `kickoff apikeys revoke` (0: at once)."""
    api_max_header_bytes: PositiveInt = 16384
    """Largest request header block the API reads, names and values (larger: 431, before it is parsed)."""
    api_max_cookie_bytes: PositiveInt = 8192
    """Largest Cookie header the API reads (larger: 431, before any cookie is parsed)."""
    api_allowed_hosts: str = ""
    """Host header values the API answers, comma-separated (`*.example.com` covers subdomains, `*` any);
    empty: localhost, 127.0.0.1, ::1 and API_HOST. Any other Host is 400 (DNS rebinding)."""
    api_metrics_require_key: bool = False
    """GET /metrics needs an API key (read scope or wider); off: open, as /healthz."""
    api_proxy_headers: bool = False
    """Take the client's address and scheme from the trusted proxies' forwarded headers (what `kickoff serve
    --proxy-headers` turns on); the console's sign-in throttle then counts per client address too."""
    api_trusted_proxies: str = "127.0.0.1"
    """With `kickoff serve --proxy-headers`: the proxies (comma-separated addresses or networks, `*` any)
    whose X-Forwarded-For / X-Forwarded-Proto give the client's address and scheme; from anyone else they
    are ignored."""
    metrics_cache_seconds: NonNegativeFloat = 10.0
    """GET /metrics reads the deployment's state from PostgreSQL and Redis at most once this often per API
    process; scrapes in between get the same figures (0: every scrape reads)."""
    console_cookie_secure: bool = False
    """The session cookie is `__Host-kickoff_console` and Secure unless a request came over plain HTTP to a
    loopback address (then `kickoff_console`); true: Secure always (a TLS proxy on the same host that sends no
    X-Forwarded-Proto)."""
    console_board_refresh_seconds: PositiveFloat = 1.0
    """How often the console's live board reads the board anew (server-sent events): once per interval for
    each distinct filter with viewers, shared by every stream of the API process."""
    console_streams_per_session: PositiveInt = 4
    """Live board streams one console session may hold open at once (one more: 429)."""
    console_streams_per_process: PositiveInt = 200
    """Live board streams one API process serves at once, every session together (one more: 429)."""
    console_session_hours: PositiveFloat = 12.0
    """A console sign-in lasts at most this long (revoking its API key ends it at once)."""
    console_session_idle_minutes: PositiveFloat = 30.0
    """A console session without a request from its browser for this long is ended (the live board's stream
    does not count)."""
    console_sessions_per_key: PositiveInt = 5
    """Console sessions one API key may hold; signing in once more ends its oldest."""
    console_sign_in_failures_per_minute: PositiveInt = 10
    """Refused console sign-ins one client address may make in a minute; beyond, sign-in answers 429 (per API
    process)."""
    audit_retention_days: PositiveInt = 400
    """Audit log entries older than this many days are deleted by the daily retention job (and `kickoff audit
    prune`)."""
    event_log_retention_days: PositiveInt | None = None
    """Messages of the match event log older than this many days are deleted by the daily retention job
    (as `kickoff events prune`; skipped while a match of that range is live). Empty: kept for ever."""
    history_retention_days: PositiveInt = 8
    """History points (the console's charts, `GET /v1/history/{series}`) older than this many days are deleted
    by the every-minute rollup job."""
    history_flush_seconds: PositiveFloat = 10.0
    """How often a process that counts history (listener workers, the API) adds its counts to PostgreSQL."""
    history_max_pending_points: PositiveInt = 100_000
    """History points a process keeps waiting at most while PostgreSQL is away (beyond that: new counts
    dropped)."""
    dramatiq_prometheus: bool = False
    """Dramatiq workers add Dramatiq's Prometheus middleware (exposition on dramatiq_prom_port, default 9191;
    one port per worker command; bound to dramatiq_prom_host, default 127.0.0.1)."""

    # -- job runs (catalog, launcher) ---------------------------------------------
    job_catalog_path: Path = Path("runs/catalog.yaml")
    """YAML file declaring the jobs publish_run accepts and the launcher starts (a relative path is taken from
    the kickoff source root)."""
    launcher_cap: PositiveInt = 4
    """Most job processes one launcher runs at once."""
    launcher_prefetch: PositiveInt = 100
    """Unacked job_runs deliveries RabbitMQ may hand one launcher at once."""
    launcher_poll_seconds: PositiveFloat = 0.05
    """Launcher loop tick: how often it reaps, starts and reads the broker."""
    launcher_drain_interval_seconds: PositiveFloat = 5.0
    """How often the launcher loop calls drain_job_runs."""
    launcher_rescan_interval_seconds: PositiveFloat = 30.0
    """How often the launcher re-reads queued run_log rows into its list."""
    launcher_claim_grace_seconds: PositiveFloat = 30.0
    """A claimed run with no pid after this long never started; requeue it."""
    launcher_shutdown_grace_seconds: NonNegativeFloat = 30.0
    """On SIGTERM, wait this long for running jobs before exiting."""
    launcher_metrics_port: NonNegativeInt = 0
    """Port (all interfaces) where `kickoff launcher` serves its Prometheus counters (the items its loops set
    aside); 0 serves none."""
    job_run_drain_batch: PositiveInt = 100
    """Outbox rows drain_job_runs sends per call."""

    # -- workers and scheduler (periodic ticks, kickoff check) -------------------
    worker_presence_ttl_seconds: PositiveFloat = 30.0
    """A worker process not seen on its queues this long is not alive (kickoff check)."""
    scheduler_alive_seconds: PositiveFloat = 150.0
    """kickoff check: the scheduler is alive when it claimed a tick slot this recently."""
    periodic_skip_delay_seconds: PositiveFloat = 30.0
    """A scheduled tick older than this when a worker takes it is skipped."""
    scheduler_tick_ttl_seconds: PositiveFloat = 3600.0
    """Lifetime of the per-slot key that stops a tick being sent twice."""

    # -- listener lifecycle: read by every process that starts, stops or judges listeners ------
    # (dispatch, sweep, stop, force-start, the board and the match card, the actor runtime's coordination;
    # API, console and CLI alike). A listener worker reads them too: they are the thresholds its runs
    # are judged by.
    listener_dispatch_within_minutes: NonNegativeInt = 10
    """Dispatch window after now for pre-game matches (minutes)."""
    listener_active_max_age_seconds: PositiveFloat = 12 * 3600.0
    """Dispatch window before now; open rows older are not active."""
    listener_heartbeat_interval_seconds: PositiveFloat = 30.0
    """How often a listener writes heartbeat_at on its row."""
    listener_heartbeat_stale_seconds: NonNegativeFloat = 180.0
    """A heartbeat older than this is Stale, then Abandoned (14)."""
    listener_worker_lease_seconds: PositiveFloat = 8.0
    """Lease of a listener worker process in Redis, renewed every quarter of it: a worker that cannot
    renew for the lease less LISTENER_LOCK_LOSS_GRACE_SECONDS + LISTENER_STOP_POLL_SECONDS (5 s by default)
    stops its listeners, and a paused, frozen or cut-off worker's matches start again once it lapses; a
    killed one's at once, from its liveness signal (LISTENER_LIVENESS_GRACE_SECONDS)."""
    listener_liveness_grace_seconds: PositiveFloat = 0.05
    """A listener worker's liveness signal (two Redis connections it holds, closed by the kernel when the
    process ends; Redis dropping one leaves it held, and a dropped one is subscribed again within
    milliseconds) that stays gone this long while its lease is fresh is a dead worker: its matches start
    again at once (a reaper whose own signal dropped within the last second, as after a Redis restart,
    waits a second). A worker alive but unable to re-establish its signal within this stops its
    listeners (lifecycle.liveness)."""
    listener_stop_flag_ttl_seconds: PositiveFloat = 300.0
    """Lifetime of an operator stop flag; starts in flight are skipped meanwhile."""
    listener_start_attempt_cap: PositiveInt = 15
    """Failed starts before a match is exhausted and skipped."""
    listener_start_attempts_ttl_seconds: PositiveFloat = 12 * 3600.0
    """Lifetime of the failed-start counter."""

    # -- the feed's play-by-play: a listener's backfill and every process that verifies or backfills
    # an archive without one (the API, `kickoff matches verify-archive`, the backfill actor) ---------
    listener_sr_env: str = "trial"
    """Access level segment of the feed URL (the push stream's and the play-by-play's)."""
    listener_play_by_play_path: str = "/{league}/{access}/games/{sr_id}/pbp.json"
    """Path of an undeclared league's play-by-play under SPORTRADAR_BASE_URL ({league}, {access}, {sr_id}
    filled in): what a backfill fetches after a gap. A declared league's is its declaration's (models.leagues)
    unless LISTENER_PLAY_BY_PLAY_PATHS overrides it."""
    listener_play_by_play_paths: dict[str, str] = {}
    """Play-by-play path per league overriding its declaration's, a JSON object such as
    {"<league>": "/<league>/{access}/v7/en/games/{sr_id}/pbp.json"}."""
    listener_connect_timeout_seconds: PositiveFloat = 10.0
    """Connect timeout of the push stream and of play-by-play fetches."""
    listener_read_timeout_seconds: PositiveFloat = 30.0
    """Read timeout of the push stream (heartbeats come every 5 s) and of play-by-play fetches."""

    # -- schedule API (league and schedule refresh) ------------------------------
    schedule_access: str = "trial"
    """Access level segment of the schedule API paths."""
    schedule_timeout_seconds: PositiveFloat = 10.0
    """HTTP timeout of schedule API calls."""

    # -- feed simulator (kickoff sim serve) --------------------------------------
    srsim_host: str = "127.0.0.1"
    """Address `kickoff sim serve` binds."""
    srsim_port: NonNegativeInt = 8765
    """Port `kickoff sim serve` binds (0: any free port)."""
    srsim_speed: PositiveFloat = 1.0
    """Simulator speed factor: 10 plays a game 10x faster."""
    srsim_watch_seconds: PositiveFloat = 1.0
    """How often `kickoff sim serve` looks for new scripts in DATA_DIR/srsim."""
    srsim_heartbeat_seconds: PositiveFloat = 5.0
    """Script seconds between two stream heartbeats (divided by the speed)."""
    srsim_resume: bool = True
    """Whether `kickoff sim serve` sends resume ids and replays from one on reconnect (false: a feed without
    resume, the resume_id parameter ignored)."""
    srsim_resume_window_seconds: PositiveFloat = 600.0
    """How long (real seconds after its send time) a message can be resumed from; older: 410."""

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {value!r} (one of {', '.join(LOG_LEVELS)})")
        return level

    @field_validator("database_url", "database_owner_url", "redis_url", "broker_url", "amqp_url")
    @classmethod
    def _known_url_scheme(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        check_url_scheme(value, URL_SCHEMES[info.field_name or ""])
        return value

    @field_validator("api_trusted_proxies")
    @classmethod
    def _proxy_addresses(cls, value: str) -> str:
        entries = [entry.strip() for entry in value.split(",") if entry.strip()]
        for entry in entries:
            if entry != "*":
                try:
                    ip_network(entry, strict=False)
                except ValueError as exc:
                    raise ValueError(f"not an address or network: {entry!r}") from exc
        return ",".join(entries)

    @field_validator("trace_url_template")
    @classmethod
    def _trace_url(cls, value: str) -> str:
        value = value.strip()
        if value:
            check_url_scheme(value.replace("{trace_id}", "x"), ("http", "https"))
            if "{trace_id}" not in value:
                raise ValueError("must contain {trace_id} (where the trace id goes)")
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
            elif isinstance(value, str) and (name.endswith("_url") or "://" in value or "?" in value):
                value = mask_url(value)
            elif isinstance(value, (Path, StrEnum)):
                value = str(value)
            out[name] = value
        return out


class MatchListenerEnvironment(KickoffSettings):
    """A match listener run's settings: KickoffSettings plus the ``listener_*`` fields only a running
    listener reads, and nothing else.

    What a process that runs listeners reads (a listener worker, ``kickoff listen``); a process that
    only starts, stops or judges them (the API, the CLI's operator commands, the scheduler) reads
    KickoffSettings, which holds the lifecycle settings they share.
    """

    listener_dry_run: bool = False
    """Write no lifecycle rows (is_test matches still write them)."""
    listener_force_exit_code: int | None = None
    """Exit with this code before any stream work (ops testing)."""
    listener_sr_url_league: str = ""
    """League segment of the push URL; injected from Match.league (empty, a run without a match row: the
    default league of models.leagues)."""
    listener_sr_request_match_uuid: str | None = None
    """Sportradar match id to follow; injected from Match.sr_id."""
    listener_skip_processing: bool = False
    """Record events only; do not run the processing pipeline."""
    listener_body: str = "listener.match_listener:MatchListener"
    """Dotted path (module:attr) of the listener body class (listener.body)."""
    listener_pipeline: str = ""
    """Dotted path (module:attr) of the event processing pipeline for every match; empty: the match's league's
    declared question pipeline (models.leagues; an undeclared league is recorded only)."""
    listener_stop_poll_seconds: PositiveFloat = 1.0
    """How often a worker polls Redis for operator stop flags."""
    listener_max_consecutive_heartbeats: PositiveInt = 360
    """Exit 10 after this many stream heartbeats with no event."""
    listener_status_reload_heartbeats: PositiveInt = 50
    """Reload Match.status every this many idle stream heartbeats."""

    # -- the listener worker's runtime (lock loss, reaper, hand-off) and test knobs ------
    listener_lock_loss_grace_seconds: NonNegativeFloat = 2.0
    """A listener that cannot extend its start lock stops this long before the lock expires."""
    listener_reaper_poll_seconds: PositiveFloat = 0.5
    """How often every listener worker looks for open rows whose worker lease is gone, abandons them and
    starts their matches again at once (its own thread: never delays the lease's renewal)."""
    listener_liveness_watch_seconds: PositiveFloat = 0.05
    """Between two reaper polls, how often every listener worker reads in Redis alone (one script, no
    PostgreSQL) the liveness signals and leases of the workers the last poll found running matches: a
    killed worker's signal is seen this soon, and the full reaper step runs at once (actors.listeners)."""
    listener_handoff_seconds: NonNegativeFloat = 5.0
    """Graceful worker shutdown (SIGTERM): how long each listener keeps streaming while a start of its
    match queued for another listener worker gets ready; once its successor waits it hands the successor
    its row and start lock and streams on until the successor's first live byte (at most this long
    again), then stops; without a waiting successor it stops when this passes (then it hands off
    after). 0: stop at once."""
    listener_handoff_poll_seconds: PositiveFloat = 0.05
    """During a hand-off, how often the stopping worker looks for successors that are ready and a waiting
    successor looks for the released start lock."""
    listener_test_duration_seconds: float | None = None
    """Scripted test listener: run this long, then exit (empty: until stopped)."""
    listener_test_exit_code: int = 0
    """Scripted test listener: exit code it returns."""
    listener_test_hang: bool = False
    """Scripted test listener: ignore request_stop (a hung body)."""

    # -- stream, archive ----------------------------------------------------------
    listener_stream_format: str = "sse"
    """Framing to ask the feed for: sse | ndjson (the response content type decides)."""
    listener_stream_readers: NonNegativeInt = 4
    """Threads of a process that read its open newline-delimited JSON streams (plain HTTP, uncompressed)
    and handle their messages, each waiting on many sockets at once; 0: each stream is read by its run's
    own thread, as an SSE, TLS or compressed stream always is (docs/listener.md, "Reading the streams")."""
    listener_stream_path: str = ""
    """Path of the push stream under SPORTRADAR_BASE_URL ({league}, {access} filled in) for every league;
    empty: each league's declared push path (models.leagues)."""
    listener_backfill: bool = True
    """Recover the events a gap missed (a reconnect, a takeover, a long silence) from a resume replay when the
    feed offers one, else from the play-by-play. Off: gaps are recorded but not recovered."""
    listener_resume: bool = True
    """Reconnect with the last message's resume id when the feed sends them (the feed replays what was
    missed); off, or refused by the feed: reconnect plainly and backfill from the play-by-play."""
    listener_backfill_attempts: PositiveInt = 8
    """Play-by-play fetches of one gap before it is recorded as unrecovered (a later gap retries it)."""
    listener_backfill_backoff_seconds: NonNegativeFloat = 1.0
    """First delay between two play-by-play fetches of one gap; doubles per failed attempt."""
    listener_backfill_backoff_max_seconds: NonNegativeFloat = 30.0
    """Longest delay between two play-by-play fetches of one gap."""
    listener_gap_heartbeats: PositiveFloat = 2.0
    """A stream silent (no event, no heartbeat) for more than this many provider heartbeat intervals is a
    gap."""
    listener_reconnect_attempts: NonNegativeInt = 5
    """Reconnects after a dropped stream before giving up (exit 12)."""
    listener_reconnect_backoff_seconds: NonNegativeFloat = 1.0
    """First reconnect delay; doubles per failed attempt."""
    listener_reconnect_backoff_max_seconds: NonNegativeFloat = 30.0
    """Longest delay between two reconnect attempts."""
    listener_reconnect_reset_seconds: NonNegativeFloat = 60.0
    """A stream connection that lasted this long resets the reconnect count."""
    listener_feed_lost_seconds: PositiveFloat = 15.0
    """A run whose feed has sent nothing for this long while its reconnects fail (at least one; each
    connect waits at most what is left of this) gives its match back: it ends (12, ``feed lost``) and the
    match starts again at once, on a worker that reaches the feed (lifecycle.feed_reach)."""
    listener_max_line_bytes: PositiveInt = 1_048_576
    """A stream line longer than this is skipped (logged)."""
    listener_max_bad_lines: PositiveInt = 20
    """Consecutive unreadable stream lines (bad JSON, oversize) before exit 11."""
    listener_archive_flush_events: PositiveInt = 1
    """Write the event archive after this many buffered events (1: every event reaches the OS at once, so a
    kill -9 loses at most a partial last event; raise it for bulk replays)."""
    listener_archive_flush_seconds: NonNegativeFloat = 0.5
    """Flush the event archive when its oldest buffered event is this old."""
    listener_event_buffer_messages: PositiveInt = 50_000
    """Messages a listener worker process holds for the event log while PostgreSQL is away; a message past it
    is not kept (a gap, which the play-by-play backfill recovers)."""
    listener_event_log_wait_seconds: PositiveFloat = 2.0
    """How long a listener waits for a message to be in the event log before it goes on without (PostgreSQL
    away: the process's writer keeps it and writes it when PostgreSQL is back)."""
    listener_event_log_retry_seconds: PositiveFloat = 0.5
    """While PostgreSQL is away, how often the event log writer tries again."""
    listener_event_log_linger_seconds: NonNegativeFloat = 0.05
    """How long the event log writer lets a batch smaller than its 2,000 rows gather more before it commits
    it: a process following many quiet streams commits their messages together instead of one commit each
    (0: every batch at once). A message reaches its processing at most this much later."""
    listener_event_inflight_messages: PositiveInt = 5_000
    """Messages one listener holds read but not yet recorded and processed; past it the listener waits for its
    writes (backpressure) and shows degraded, except while PostgreSQL is away (the buffer above decides)."""
    # LISTENER_DB_SLOTS_PER_PROCESS is the older name of the starts' half of this limit.
    listener_db_concurrency: PositiveInt = Field(
        8, validation_alias=AliasChoices("listener_db_concurrency", "listener_db_slots_per_process")
    )
    """Listener work of one process talking to PostgreSQL at once: starts, shutdown writes and the listeners'
    own queries (LISTENER_DB_SLOTS_PER_PROCESS is still read as this)."""


def own_fields(cls: type[KickoffSettings]) -> list[str]:
    """The fields ``cls`` declares itself: all of KickoffSettings', a subclass's beyond KickoffSettings."""
    if cls is KickoffSettings:
        return list(cls.model_fields)
    return [name for name in cls.model_fields if name not in KickoffSettings.model_fields]


def env_example() -> str:
    """Return the text of ``.env.example``: every field, its default and its meaning."""
    lines = [
        "# kickoff settings. Copy to .env at the repository root and edit.",
        "# Precedence: keyword arguments > process environment > .env > these defaults.",
        "",
    ]
    for cls in (KickoffSettings, MatchListenerEnvironment):
        lines.append(f"# --- {cls.__name__} ---")
        for name in own_fields(cls):
            info = cls.model_fields[name]
            default = info.default
            if isinstance(default, SecretStr) or default is None:
                default = ""
            elif isinstance(default, StrEnum):
                default = default.value
            lines.append(f"# {' '.join((info.description or '').split())}")
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


#: KickoffSettings or a subclass of it (what a loader returns).
SettingsT = TypeVar("SettingsT", bound=KickoffSettings)


def _read(cls: type[SettingsT], overrides: dict[str, Any]) -> SettingsT:
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(describe_settings_error(exc)) from exc


def load_settings(**overrides: Any) -> KickoffSettings:
    """Read KickoffSettings once at process start; keyword arguments win over everything.

    An invalid value raises ConfigurationError naming the setting (one line).
    """
    return _read(KickoffSettings, overrides)


def load_listener_settings(**overrides: Any) -> MatchListenerEnvironment:
    """Read MatchListenerEnvironment once (a process that runs listeners); see load_settings."""
    return _read(MatchListenerEnvironment, overrides)


def listener_settings_of(process: KickoffSettings) -> MatchListenerEnvironment:
    """The MatchListenerEnvironment of a process whose KickoffSettings are ``process``: its values, plus the
    ``listener_*`` fields read now (environment > ``.env`` > defaults); see load_settings."""
    return load_listener_settings(**{name: getattr(process, name) for name in KickoffSettings.model_fields})
