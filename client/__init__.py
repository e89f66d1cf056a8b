"""kickoff's own clients for callers: the trigger retry policy in process and the HTTP API client.

``client.trigger_client`` calls the library triggers with the spec's retry policy and X-Run-Id;
``client.trigger_http`` sends them to ``kickoff serve`` with the same policy.
"""
