"""Peewee models on PostgreSQL, the database handle, pure status rules, badges and Redis coordination."""

from models.badges import Badge, derive_badge
from models.db import database, init_database
from models.league import League
from models.listener_record import MatchListenerRecord
from models.match import Match
from models.question import Question
from models.season import Season
from models.team import Team

__all__ = [
    "Badge",
    "League",
    "Match",
    "MatchListenerRecord",
    "Question",
    "Season",
    "Team",
    "database",
    "derive_badge",
    "init_database",
]
