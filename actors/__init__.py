"""Dramatiq broker set-up and actors (dispatch, start, stop, sweep, refresh, drain).

Importing this package sets up the process once (actors.process: the settings, read once, and
the RedisBroker as Dramatiq's broker), then imports every actor module explicitly, so
``dramatiq actors`` (default queue) and ``dramatiq actors --queues match_listeners --threads N``
find all actors. Nothing connects at import time. How to declare an actor: see ``actors/broker.py``.
"""

from __future__ import annotations

# The process (settings and broker, set up once; every actor module imports it first), then
# the actor modules: one explicit import per module.
from actors import (
    listeners,  # noqa: F401  dispatch, start, stop, sweep
    outbox,  # noqa: F401  periodic outbox drain
    process,  # noqa: F401  settings and broker, set up once
    refresh,  # noqa: F401  league metadata, teams, seasons; schedule refresh (season, daily, weekly)
    runs,  # noqa: F401  job runs: scheduled catalog jobs and run outbox drain
)
