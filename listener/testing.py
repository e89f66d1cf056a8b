"""A scripted listener body for tests and ops drills: duration, exit code and hang come from settings.

Select it with ``LISTENER_BODY=listener.testing:ScriptedListener`` (or per match in
``Match.listener_start_settings``). ``listener_test_duration_seconds`` (empty: until stopped),
``listener_test_exit_code`` and ``listener_test_hang`` (ignore ``request_stop``) script it.
"""

from __future__ import annotations

import logging
import threading
import time

from listener.body import ListenerContext

logger = logging.getLogger(__name__)


class ScriptedListener:
    """Implements listener.body.ListenerBody without any stream."""

    def __init__(self) -> None:
        self._stop = threading.Event()

    def run(self, ctx: ListenerContext) -> int:
        s = ctx.settings
        duration = s.listener_test_duration_seconds
        deadline = None if duration is None else time.monotonic() + duration
        logger.info(
            "match %s: scripted listener: duration %s, exit %s, hang %s",
            ctx.match_id,
            duration,
            s.listener_test_exit_code,
            s.listener_test_hang,
        )
        ctx.on_live()  # no stream: live at once (a run handed over to this one stops now)
        if not s.listener_test_hang:
            if self._stop.wait(duration):
                logger.info("match %s: scripted listener stopping on request", ctx.match_id)
                return 0
            return int(s.listener_test_exit_code)
        while deadline is None or time.monotonic() < deadline:
            # A hung body: ignores request_stop; short sleeps keep it interruptible.
            time.sleep(0.05)
        return int(s.listener_test_exit_code)

    def request_stop(self) -> None:
        self._stop.set()
