"""A job that does nothing (optionally sleeping ``seconds``) and exits 0; traces itself if asked."""

from __future__ import annotations

import time

from runs.jobs.trace import params, write_trace


def main() -> int:
    run_params = params()
    seconds = float(run_params.get("seconds", 0))
    if seconds > 0:
        time.sleep(seconds)
    write_trace(run_params)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
