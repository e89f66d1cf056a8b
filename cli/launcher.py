"""``kickoff launcher``: consume job_runs and start catalog jobs as processes under a cap."""

from __future__ import annotations

import click

from cli.context import CliContext


@click.command()
@click.option("--cap", type=click.IntRange(1, 1000), default=None, help="Most runs at once (LAUNCHER_CAP).")
@click.pass_obj
def launcher(obj: CliContext, cap: int | None) -> None:
    """Start job runs from job_runs as processes, at most --cap at once on this host.

    Each delivery is acked once its run is checked and listed, so runs waiting for a slot never
    hold one. On start it rebuilds its list from queued run_log rows and watches (or finishes)
    runs an earlier launcher on this host left running. It also drains the run outbox.
    SIGTERM/Ctrl-C: stop taking runs, wait LAUNCHER_SHUTDOWN_GRACE_SECONDS for running ones.
    Job output goes to DATA_DIR/runs/<job>/<run_id>.<attempt>.log. A delivery that is not a
    RunCommand it can start is set aside on job_runs.XQ with its reason (header x-kickoff-reason)
    and the launcher goes on; LAUNCHER_METRICS_PORT serves its counters to Prometheus.
    """
    obj.log_progress()
    from publisher.amqp import publisher_from_settings
    from runs.catalog import load_catalog
    from runs.launcher import Launcher, LauncherConfig

    settings = obj.settings
    catalog = load_catalog(settings.job_catalog_path)
    obj.database()
    config = LauncherConfig.from_settings(settings, cap=cap or settings.launcher_cap)
    if settings.launcher_metrics_port:
        from prometheus_client import start_http_server

        from config.set_aside import set_aside_counter

        set_aside_counter()  # exposed (at 0) from the start
        start_http_server(settings.launcher_metrics_port)
    with publisher_from_settings(settings) as publisher:
        Launcher(
            catalog=catalog,
            publisher=publisher,
            data_dir=settings.data_dir,
            amqp_url=settings.amqp_url,
            config=config,
        ).run()
