"""DRAMATIQ_PROMETHEUS=true: a real worker exposes Dramatiq's own metrics on dramatiq_prom_port."""

from __future__ import annotations

from tests.waiting import wait_for
from tests.worker_metrics import enqueue_default, metrics_worker


def _listening_hosts(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* write them) of the sockets listening on ``port``."""
    hosts = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in list(fh)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.rpartition(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    hosts.add(address)
    return hosts


def test_a_worker_with_dramatiq_prometheus_serves_its_metrics_on_loopback_only(
    test_env, settings, migrated_database, redis_client, tmp_path
):
    with metrics_worker(test_env, tmp_path=tmp_path, host=None) as worker:
        enqueue_default(settings, "sweep_stale_match_listeners")  # the worker's broker: this run's namespace
        found: list[str] = []

        def scraped() -> bool:
            families = worker.families()
            found[:] = [f.name for f in families or ()]
            return any(name.startswith("dramatiq_") for name in found)

        wait_for(scraped, timeout=90, what="the worker's Prometheus exposition server")
        assert {"dramatiq_messages", "dramatiq_message_durations_milliseconds"} & set(found), found
        # No dramatiq_prom_host in the environment: 127.0.0.1, not Dramatiq's 0.0.0.0.
        assert _listening_hosts(worker.port) == {"0100007F"}


def test_a_worker_serves_the_count_of_matches_its_dispatch_set_aside(
    test_env, settings, migrated_database, redis_client, make_match, tmp_path
):
    make_match(status="inprogress", listener_start_settings={"no_such_setting": 1})
    with metrics_worker(test_env, tmp_path=tmp_path) as worker:
        enqueue_default(settings, "dispatch_upcoming_match_listeners", within_minutes=0)
        counted: list[float] = []

        def scraped() -> bool:
            counted[:] = [
                s.value
                for f in worker.families() or ()
                for s in f.samples
                if s.name == "kickoff_items_set_aside_total" and s.labels.get("loop") == "dispatch"
            ]
            return bool(counted)

        wait_for(scraped, timeout=90, what="the worker's count of set-aside matches")
        assert sum(counted) == 1
        assert "set aside: unknown listener setting(s)" in worker.process.output()


def test_the_exposition_address_is_loopback_unless_dramatiq_prom_host_names_one(monkeypatch):
    from actors.prometheus import exposition_address

    monkeypatch.delenv("dramatiq_prom_host", raising=False)
    assert exposition_address()[0] == "127.0.0.1"
    monkeypatch.setenv("dramatiq_prom_host", "0.0.0.0")
    assert exposition_address()[0] == "0.0.0.0"
