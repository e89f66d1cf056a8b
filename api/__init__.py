"""The HTTP API of kickoff (``kickoff serve``): triggers, trades, runs, listeners, health and metrics."""
