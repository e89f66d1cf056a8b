"""A job that exits with ``exit_code`` (default 1) until attempt ``succeed_on_attempt``, then 0."""

from __future__ import annotations

import os
import sys

from runs.jobs.trace import params, write_trace


def main() -> int:
    run_params = params()
    attempt = int(os.environ.get("RUN_ATTEMPT") or 1)
    succeed_on = run_params.get("succeed_on_attempt")
    code = 0 if succeed_on is not None and attempt >= int(succeed_on) else int(run_params.get("exit_code", 1))
    print(f"attempt {attempt}: exiting {code}", file=sys.stderr)
    write_trace(run_params, exit_code=code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
