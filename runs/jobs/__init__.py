"""Small example jobs kickoff ships (no-op, sleep, fail, run_scope); each runs as ``python -m``."""
