"""The in-process match listener: stream client, archive, heartbeat, exit codes."""
