"""``kickoff serve``: the HTTP API (FastAPI on uvicorn)."""

from __future__ import annotations

import os

import click

from cli.common import count_option
from cli.context import CliContext


@click.command("serve")
@click.option(
    "--host",
    default=None,
    help="Address to bind (default API_HOST; an allowed Host unless API_ALLOWED_HOSTS lists others).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port to bind (default API_PORT).")
@count_option("--workers", default=None, help="uvicorn worker processes (default API_WORKERS).")
@click.option(
    "--proxy-headers",
    is_flag=True,
    help="Behind a proxy: take the client's address and scheme from X-Forwarded-For / X-Forwarded-Proto "
    "of the proxies in API_TRUSTED_PROXIES (from anyone else they are ignored); the console's sign-in "
    "throttle then counts per client address too (API_PROXY_HEADERS=true does the same).",
)
@click.pass_obj
def serve_command(
    obj: CliContext, host: str | None, port: int | None, workers: int | None, proxy_headers: bool
) -> None:
    """Serve the HTTP API (triggers, trades, runs, listeners, /healthz, /readyz, /metrics, /docs)
    and the operator console at / (sign in with an operator or read key).

    Every /v1 route needs `Authorization: Bearer KEY` (`kickoff apikeys create`); /healthz,
    /readyz and /metrics need none (API_METRICS_REQUIRE_KEY=true protects /metrics). See
    docs/api.md and docs/console.md.

    The console's session cookie is Secure (`__Host-`) unless a request comes over plain HTTP to
    a loopback address; behind a TLS proxy, serve with --proxy-headers.
    """
    import uvicorn

    settings = obj.settings
    proxy_headers = proxy_headers or settings.api_proxy_headers
    if proxy_headers:  # the app (built from the environment) trusts forwarded addresses too
        os.environ["API_PROXY_HEADERS"] = "true"
    if host:
        # The app is built from the environment (uvicorn's factory): its default API_ALLOWED_HOSTS
        # takes the address bound, so --host counts as API_HOST there too.
        os.environ["API_HOST"] = host
    uvicorn.run(
        "api.app:app_from_env",
        factory=True,
        host=host or settings.api_host,
        port=settings.api_port if port is None else port,
        workers=workers or settings.api_workers,
        log_level=settings.log_level.lower(),
        access_log=False,
        proxy_headers=proxy_headers,
        forwarded_allow_ips=settings.api_trusted_proxies,
        # The console's live board streams until the browser goes: do not wait on it at shutdown.
        timeout_graceful_shutdown=5,
    )
