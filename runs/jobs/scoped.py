"""A job recorded with run_scope: the outermost scope adopts RUN_ID, each step is a child run."""

from __future__ import annotations

from publisher.run_context import get_run_id
from runs.jobs.trace import params, write_trace
from runs.scope import run_scope


def main() -> int:
    run_params = params()
    seen: dict[str, str | None] = {}
    with run_scope("scoped") as outer:
        seen["outer"] = get_run_id()
        for step in run_params.get("steps", ["extract", "load"]):
            with run_scope(step) as child:
                seen[step] = child.run_id
        seen["after"] = get_run_id()
    write_trace(run_params, scopes=seen, outer=outer.run_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
