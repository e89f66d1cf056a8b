"""The operator console: server-rendered pages on the library functions the API and the CLI call."""
