"""Audit values without services: the actors and an entry as list --json prints it."""

from __future__ import annotations

import os
import pwd
import socket
from datetime import UTC, datetime, timedelta, timezone

import pytest

from models.audit import Actor, AuditEntry

pytestmark = pytest.mark.unit


def test_the_cli_actor_is_the_os_user_at_the_host_and_a_key_actor_its_id_and_name(monkeypatch):
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "root")  # the environment cannot choose who the CLI's user is
    assert Actor.cli() == Actor(None, f"{pwd.getpwuid(os.getuid()).pw_name}@{socket.gethostname()}")
    assert Actor.api_key("k1", "ci-bot") == Actor("k1", "ci-bot")
    with pytest.raises(AttributeError):
        Actor.cli().name = "someone else"  # type: ignore[misc]


def test_an_entry_prints_its_target_and_utc_time():
    at = datetime(2030, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    entry = AuditEntry(1, at, None, "me@host", "listener.stop", "match", "m1", "why", {"a": 1}, None, "r1")
    assert entry.as_dict() == {
        "at": datetime(2030, 1, 1, 10, 0, tzinfo=UTC).isoformat(),
        "who": "me@host",
        "who_key_id": None,
        "action": "listener.stop",
        "target": "match:m1",
        "title": None,
        "reason": "why",
        "before": {"a": 1},
        "after": None,
        "request_id": "r1",
    }
    assert AuditEntry(
        2, at, None, "x", "listeners.sweep", "listeners", None, None, None, None, None
    ).target == ("listeners")
