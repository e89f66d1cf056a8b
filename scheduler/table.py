"""The periodic table: which actor the scheduler sends, when, with which kwargs, in which app_env.

To add a periodic job append one ``PeriodicEntry`` to ``PERIODIC`` (the actor must be imported
by ``actors/__init__.py``)::

    PeriodicEntry("prune_audit_log", actor="prune_audit_log", cron="30 3 * * *", envs=ALL_ENVS)

``cron`` is a Periodiq cron spec (``m h dom mon dow``, UTC; ``@hourly`` etc. work). ``name``
must be unique: the scheduler's per-slot dedupe key is built from it. The league refreshes come
from the league declarations (models.leagues): one entry per declared league and job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.settings import AppEnv
from models.leagues import declared

EVERY_MINUTE = "* * * * *"
ALL_ENVS = frozenset(AppEnv)
DEVELOP_ONLY = frozenset({AppEnv.DEVELOP})
NOT_DEVELOP = frozenset({AppEnv.STAGING, AppEnv.PRODUCTION})
#: Leagues whose metadata, teams, seasons and season schedule the scheduler refreshes: every declared
#: one (models.leagues), read when the table is built.
REFRESHED_LEAGUES = tuple(d.name for d in declared())


@dataclass(frozen=True)
class PeriodicEntry:
    """One row of the periodic table."""

    name: str  # unique entry name (dedupe key, logs)
    actor: str  # Dramatiq actor name
    cron: str  # Periodiq cron spec, UTC
    envs: frozenset[AppEnv]  # app_envs in which the entry is sent
    kwargs: dict[str, Any] = field(default_factory=dict)  # keyword arguments of the actor


PERIODIC: list[PeriodicEntry] = [
    # Develop auto-starts test clones only, so a laptop never follows live matches.
    PeriodicEntry(
        "dispatch_upcoming_test_match_listeners",
        actor="dispatch_upcoming_test_match_listeners",
        cron=EVERY_MINUTE,
        envs=DEVELOP_ONLY,
    ),
    PeriodicEntry(
        "dispatch_upcoming_match_listeners",
        actor="dispatch_upcoming_match_listeners",
        cron=EVERY_MINUTE,
        envs=NOT_DEVELOP,
    ),
    PeriodicEntry(
        "sweep_stale_match_listeners",
        actor="sweep_stale_match_listeners",
        cron=EVERY_MINUTE,
        envs=NOT_DEVELOP,
    ),
    # Publishes outbox rows whose immediate publish failed (broker outage), in every app_env.
    PeriodicEntry("drain_outbox", actor="drain_outbox", cron=EVERY_MINUTE, envs=ALL_ENVS),
    # Settles the results consumers reported into execution_log (verified or failed).
    PeriodicEntry("verify_action_results", actor="verify_action_results", cron=EVERY_MINUTE, envs=ALL_ENVS),
    # Scheduled catalog jobs (one run per cron slot, job@slot) and the run outbox drain.
    PeriodicEntry("tick_job_runs", actor="tick_job_runs", cron=EVERY_MINUTE, envs=ALL_ENVS),
    # History: this minute's snapshots, the recent minutes derived again, points past the retention deleted.
    PeriodicEntry("rollup_history", actor="rollup_history", cron=EVERY_MINUTE, envs=ALL_ENVS),
    # Deletes audit log entries older than AUDIT_RETENTION_DAYS, in every app_env.
    PeriodicEntry("prune_audit_log", actor="prune_audit_log", cron="30 3 * * *", envs=ALL_ENVS),
    # Deletes event log messages older than EVENT_LOG_RETENTION_DAYS (a no-op while it is not set).
    PeriodicEntry("prune_event_log", actor="prune_event_log", cron="45 3 * * *", envs=ALL_ENVS),
    # League metadata, teams and seasons, daily before the season schedule (which reads the seasons).
    *(
        PeriodicEntry(
            f"{actor}_{league}", actor=actor, cron=cron, envs=NOT_DEVELOP, kwargs={"league": league}
        )
        for actor, cron in (
            ("refresh_league_metadata", "0 4 * * *"),
            ("refresh_league_teams", "5 4 * * *"),
            ("refresh_league_seasons", "10 4 * * *"),
        )
        for league in REFRESHED_LEAGUES
    ),
    # Schedule refresh keeps match rows current (freeze/heal); it never starts listeners.
    *(
        PeriodicEntry(
            f"refresh_league_schedule_{league}",
            actor="refresh_league_schedule",
            cron="15 4 * * *",
            envs=NOT_DEVELOP,
            kwargs={"league": league},
        )
        for league in REFRESHED_LEAGUES
    ),
    PeriodicEntry(
        "refresh_daily_schedules", actor="refresh_daily_schedules", cron="*/30 * * * *", envs=NOT_DEVELOP
    ),
    PeriodicEntry(
        "refresh_weekly_schedules", actor="refresh_weekly_schedules", cron="10,40 * * * *", envs=NOT_DEVELOP
    ),
]


def entries_for(app_env: AppEnv | str, table: list[PeriodicEntry] | None = None) -> list[PeriodicEntry]:
    """The entries the scheduler sends in ``app_env``."""
    env = AppEnv(app_env)
    return [e for e in (PERIODIC if table is None else table) if env in e.envs]
