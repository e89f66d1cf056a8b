"""This process's settings and Dramatiq broker: read and set up once, when the actors are first imported.

Importing this module reads the settings (MatchListenerEnvironment: environment, then ``.env``,
then defaults), starts failure reports and sets the RedisBroker as Dramatiq's broker, binding the
database. Nothing connects at import time. Actor modules read ``process.settings`` when they run
(never a copy taken at import), so there is one place to point them elsewhere.
"""

from __future__ import annotations

from actors.broker import setup_broker
from actors.reporting import init_reporting
from config.settings import load_listener_settings

settings = load_listener_settings()
init_reporting(settings)  # before the broker: the Dramatiq integration hooks brokers built after it
kickoff_broker = setup_broker(settings)
