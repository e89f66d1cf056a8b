"""Dramatiq broker set-up and actors (dispatch, start, stop, sweep, archive backfill, refresh, drain).

Importing this package reads the settings once (environment, then ``.env``, then defaults) and
configures the process's actor runtime (``actors.runtime``: the broker BROKER_URL selects, set as
Dramatiq's broker, the database and the Redis barriers), then imports every actor module explicitly,
so ``dramatiq actors`` (default queue) and ``dramatiq actors --queues match_listeners --threads N``
find all actors. Nothing connects at import time.

The settings are a MatchListenerEnvironment: one worker command serves every queue, and a
match_listeners worker runs listeners in its own process (their worker runtime; LISTENER_DB_CONCURRENCY
sizes every worker's pool). Actors that run no listener pass them on as the KickoffSettings they also
are. A process that imports this package only to send messages (the API at boot, the CLI's senders)
configures the same runtime, while its own settings stay KickoffSettings.

How to declare an actor: see ``actors/broker.py``.
"""

from __future__ import annotations

from actors import runtime
from actors.reporting import init_reporting
from config.settings import load_listener_settings

_settings = load_listener_settings()
init_reporting(_settings)  # before the broker: the Dramatiq integration hooks brokers built after it
runtime.configure(_settings)

# Actor modules: one explicit import per module (keep this block last).
from actors import (  # noqa: E402 - after the runtime is configured
    archive,  # noqa: F401  backfill a match's archive from the play-by-play
    audit,  # noqa: F401  audit log retention
    listeners,  # noqa: F401  dispatch, start, stop, sweep
    outbox,  # noqa: F401  periodic outbox drain
    refresh,  # noqa: F401  league metadata, teams, seasons; schedule refresh (season, daily, weekly)
    runs,  # noqa: F401  job runs: scheduled catalog jobs and run outbox drain
)
