"""Dramatiq broker set-up and actors (dispatch, start, stop, sweep, archive backfill, refresh, drain).

Importing this package reads the KickoffSettings once (environment, then ``.env``, then defaults)
and configures the process's actor runtime (``actors.actor_runtime``: the broker BROKER_URL selects, set as
Dramatiq's broker, the database and the Redis coordination store), then imports every actor module explicitly,
so ``dramatiq actors`` (default queue) and ``dramatiq actors --queues match_listeners --threads N``
find all actors. Nothing connects at import time.

The settings only a running listener reads (MatchListenerEnvironment's own ``listener_*`` fields)
are not read here: a process that imports this package only to send messages (the API at boot, the
console, the CLI's senders, the scheduler) never reads them, so a bad value of one cannot stop it.
A worker that consumes
``match_listeners`` reads them when it boots, before its threads take a message
(``actors.actor_runtime.listener_settings``): a bad value stops that worker at start, naming the setting,
and its runtime then runs on them (LISTENER_DB_CONCURRENCY sizes its database pool).

How to declare an actor: see ``actors/broker.py``.
"""

from __future__ import annotations

from actors import actor_runtime
from actors.reporting import init_reporting
from config.settings import load_settings
from config.tracing import configure_tracing

_settings = load_settings()
configure_tracing(service="kickoff-worker")  # OTEL_*: before the broker (its tracing middleware)
init_reporting(_settings)  # before the broker: the Dramatiq integration hooks brokers built after it
actor_runtime.configure(_settings)

# Actor modules: one explicit import per module (keep this block last).
from actors import (  # noqa: E402 - after the runtime is configured
    archive,  # noqa: F401  backfill a match's archive from the play-by-play
    audit,  # noqa: F401  audit log retention
    history,  # noqa: F401  history rollup and retention; the worker's history recorder
    listeners,  # noqa: F401  dispatch, start, stop, sweep
    outbox,  # noqa: F401  periodic outbox drain
    refresh,  # noqa: F401  league metadata, teams, seasons; schedule refresh (season, daily, weekly)
    runs,  # noqa: F401  job runs: scheduled catalog jobs and run outbox drain
)
