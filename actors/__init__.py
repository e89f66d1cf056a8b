"""Dramatiq broker set-up and actors (dispatch, start, stop, sweep, refresh, drain).

Importing this package reads the settings once (MatchListenerEnvironment: environment, then
``.env``, then defaults), sets the RedisBroker as Dramatiq's broker and binds the database,
then imports every actor module explicitly, so ``dramatiq actors`` (default queue) and
``dramatiq actors --queues match_listeners --threads N`` find all actors. Nothing connects at
import time. How to declare an actor: see ``actors/broker.py``.
"""

from __future__ import annotations

from actors.broker import setup_broker
from actors.reporting import init_reporting
from config.settings import load_listener_settings

settings = load_listener_settings()
init_reporting(settings)  # before the broker: the Dramatiq integration hooks brokers built after it
kickoff_broker = setup_broker(settings)

# Actor modules: one explicit import per module (keep this block last).
from actors import (  # noqa: E402 - after the broker is set
    listeners,  # noqa: F401  dispatch, start, stop, sweep
    outbox,  # noqa: F401  periodic outbox drain
    refresh,  # noqa: F401  league metadata, teams, seasons; schedule refresh (season, daily, weekly)
    runs,  # noqa: F401  job runs: scheduled catalog jobs and run outbox drain
)
