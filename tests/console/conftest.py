"""Console fixtures: one `kickoff serve` with the lifecycle tests' short intervals, sign-in helpers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import SERVER_ENV, Server, feed_documents, key_per_scope, server_env, serving
from tests.console.browsers import browser, listener_worker, open_console
from tests.lifecycle.conftest import SHORT
from tests.publisher.conftest import pub_settings, publisher

__all__ = [
    "browser",
    "feed_documents",
    "listener_worker",
    "open_console",
    "pub_settings",
    "publisher",
    "server_env",
]

#: The server reads the board with the listener workers' intervals (badges judged the same way)
#: and pushes board changes every 0.3 s.
CONSOLE_ENV = {**SERVER_ENV, **SHORT, "CONSOLE_BOARD_REFRESH_SECONDS": "0.3"}


@pytest.fixture(scope="session")
def console_env(server_env: dict[str, str]) -> dict[str, str]:
    """Environment of the console's server and of the listener workers the browser tests start."""
    return {**server_env, **CONSOLE_ENV}


@pytest.fixture(scope="session")
def console_server(console_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One `kickoff serve` for every console test of the session."""
    with serving(console_env, tmp_path_factory.mktemp("console")) as server:
        yield server


@pytest.fixture
def console_keys(db: str) -> dict[str, str]:
    """One live key per scope."""
    return key_per_scope("console")


CSRF_IN_PAGE = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class Signed:
    """An HTTP client holding a console session cookie, and that session's CSRF token."""

    client: httpx.Client
    csrf: str


def sign_in(server: Server, key: str) -> Signed:
    """Sign in through the form; the CSRF token is read from the board page."""
    client = httpx.Client(base_url=server.url, timeout=60.0)
    answer = client.post("/sign-in", data={"api_key": key, "next": "/"})
    assert answer.status_code == 303, answer.text
    page = client.get("/")
    assert page.status_code == 200, page.text
    found = CSRF_IN_PAGE.search(page.text)
    assert found, page.text
    return Signed(client, found.group(1))


@pytest.fixture
def signed_in(console_server: Server) -> Iterator[callable]:
    """``signed_in(key)``: a signed-in client (closed after the test)."""
    opened: list[Signed] = []

    def make(key: str) -> Signed:
        s = sign_in(console_server, key)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.client.close()


def write_archive(data_dir: str | Path, league: str, sr_id: str, events: int = 3) -> Path:
    """``events`` push events of match ``sr_id`` in its event log (what a recorded match leaves); returns
    where a listener host keeps its local files (the runs' text logs)."""
    from listener.archive import archive_path, shortcode_for
    from models.match import Match
    from tests.logged import event_log_of

    match = Match.get(Match.sr_id == sr_id)
    messages = [
        {"payload": {"game": {"id": sr_id}, "event": {"sequence": n}}, "metadata": {}} for n in range(events)
    ]
    event_log_of(match.id, messages).close()
    path = archive_path(data_dir, league, shortcode_for(sr_id))
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
