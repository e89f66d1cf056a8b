"""The console's browser fixtures (Playwright driving Debian's Chromium), shared by the browser test modules
through tests/console/conftest.py: one browser per session, a signed-in page, real listener workers."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.api.conftest import _delete_broker_namespace
from tests.lifecycle.conftest import WorkerProcess
from tests.lifecycle.test_worker_e2e import WORKER_ENV

CHROMIUM = "/usr/bin/chromium"
#: Generous deadline for what depends on a worker process on a busy machine (ms).
SLOW = 60_000


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does it)")
    with _playwright().sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


@pytest.fixture
def open_console(browser, console_server) -> Iterator[Callable[[str], object]]:
    """``open_console(key)``: a new browser context signed in through the form, on the board."""
    contexts = []

    def open_(key: str) -> object:
        context = browser.new_context(base_url=console_server.url)
        contexts.append(context)
        page = context.new_page()
        page.goto("/")
        _playwright().expect(page).to_have_url(re.compile(r"/sign-in\?next="))
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Sign in").click()
        _playwright().expect(page.get_by_role("heading", name="Match listeners")).to_be_visible()
        return page

    yield open_
    for context in contexts:
        context.close()


@pytest.fixture
def listener_worker(console_env, tmp_path, redis_client) -> Iterator[Callable[[], WorkerProcess]]:
    """Start real `dramatiq actors` listener workers.

    At teardown the workers are killed, then their start messages (retries included) are removed
    from this run's Dramatiq namespace and ``redis_client`` removes the barriers and worker leases,
    so nothing of these tests reaches a later test's workers.
    """
    workers: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        worker = WorkerProcess(
            {**console_env, **WORKER_ENV},
            tmp_path / f"worker{len(workers)}.log",
            queues=("match_listeners",),
            threads=4,
        )
        workers.append(worker)
        worker.wait_ready(timeout=SLOW / 1000)
        return worker

    yield start
    for worker in workers:
        worker.close()
    _delete_broker_namespace(console_env)


def _playwright():
    """Playwright's sync API, imported when a browser test runs (the other console tests need none)."""
    return pytest.importorskip("playwright.sync_api")
