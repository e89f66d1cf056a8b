"""bench/chaos.py's clock-skew fault: on PYTHONPATH, every Python process started with
``KICKOFF_CLOCK_SKEW_SECONDS`` set runs kickoff's clock (config.clock.utcnow) that far off the
wall clock - a host whose clock is wrong. Forked children (dramatiq's worker processes) inherit it.
``time.monotonic()`` is left alone: a wall clock that is off does not change it either."""

import os

_skew = float(os.environ.get("KICKOFF_CLOCK_SKEW_SECONDS") or 0)
if _skew:
    from datetime import UTC, datetime, timedelta

    from config import clock

    clock.set_clock(lambda: datetime.now(UTC) + timedelta(seconds=_skew))
