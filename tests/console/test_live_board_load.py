"""A real `kickoff serve` under many viewers: one board reading per filter and interval, stream caps,
the connection pool, /metrics and /readyz kept."""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Iterator

import httpx
import psycopg2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from config.clock import utcnow
from models.listener_record import MatchListenerRecord
from tests.api.conftest import Server, serving
from tests.console.conftest import Signed, sign_in
from tests.waiting import wait_for

pytestmark = pytest.mark.services

POOL = 6
PER_SESSION = 2
PER_PROCESS = 32
METRICS_CACHE_SECONDS = 8
APP_NAME = f"kickoff-serve-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def board_server(console_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`kickoff serve` with small stream caps and pool; its PostgreSQL sessions carry APP_NAME."""
    env = {
        **console_env,
        "DATABASE_URL": f"{console_env['DATABASE_URL']}?application_name={APP_NAME}",
        "DATABASE_POOL_MAX_CONNECTIONS": str(POOL),
        "CONSOLE_STREAMS_PER_SESSION": str(PER_SESSION),
        "CONSOLE_STREAMS_PER_PROCESS": str(PER_PROCESS),
        "CONSOLE_SESSIONS_PER_KEY": "100",  # the tests sign one key in many times
        "METRICS_CACHE_SECONDS": str(METRICS_CACHE_SECONDS),
        "DATABASE_POOL_MAX_AGE_SECONDS": "3600",  # no connection renewed while a test counts them
    }
    with serving(env, tmp_path_factory.mktemp("board-load")) as server:
        yield server


def _metric(server: Server, name: str, labels: dict[str, str] | None = None) -> float:
    text = httpx.get(server.url + "/metrics", timeout=60).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and (labels is None or sample.labels == labels):
                return sample.value
    raise AssertionError(f"{name} {labels or ''} not in /metrics")


class Stream:
    """One /events/board stream read in a thread: the frame ids (``id:``) and events it got."""

    def __init__(self, signed: Signed, params: dict[str, str] | None = None) -> None:
        self.ids: list[int] = []
        self.events: list[str] = []
        self.status: int | None = None
        self._opened = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(signed.client, params or {}), daemon=True)
        self._thread.start()
        assert self._opened.wait(60), "the stream did not answer"

    def _read(self, client: httpx.Client, params: dict[str, str]) -> None:
        with client.stream("GET", "/events/board", params=params) as answer:
            self.status = answer.status_code
            self._opened.set()
            if answer.status_code != 200:
                return
            for line in answer.iter_lines():
                if self._stop.is_set():
                    return
                if line.startswith("id: "):
                    self.ids.append(int(line[4:]))
                elif line.startswith("event: "):
                    self.events.append(line[7:])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)


@pytest.fixture
def streams(board_server: Server) -> Iterator[list[Stream]]:
    opened: list[Stream] = []
    yield opened
    for s in opened:
        s.close()
    wait_for(
        lambda: _metric(board_server, "kickoff_console_board_streams") == 0,
        timeout=60,
        what="every stream of the test to be closed on the server",
    )


@pytest.fixture
def sessions(board_server: Server, console_keys: dict[str, str]) -> Iterator[list[Signed]]:
    """``sessions`` grows with ``open_session``: signed-in operator clients, closed after the test."""
    opened: list[Signed] = []
    yield opened
    for s in opened:
        s.client.close()


def _session(board_server: Server, key: str, opened: list[Signed]) -> Signed:
    signed = sign_in(board_server, key)
    opened.append(signed)
    return signed


def _open(streams: list[Stream], signed: Signed, params: dict[str, str] | None = None) -> Stream:
    stream = Stream(signed, params)
    streams.append(stream)
    assert stream.status == 200
    return stream


def test_streams_of_one_filter_share_one_board_reading_per_interval(
    board_server, console_keys, sessions, streams, make_match
):
    make_match(status="inprogress")
    clients = [_session(board_server, console_keys["operator"], sessions) for _ in range(2)]
    viewers = [_open(streams, c) for c in clients for _ in range(PER_SESSION)]
    wait_for(lambda: all(len(v.ids) >= 2 for v in viewers), timeout=60, what="two frames on every stream")
    reads_before, first = _metric(board_server, "kickoff_console_board_reads_total"), viewers[0].ids[-1]
    wait_for(lambda: viewers[0].ids[-1] >= first + 10, timeout=120, what="ten more frames")
    reads_after, last = _metric(board_server, "kickoff_console_board_reads_total"), viewers[0].ids[-1]
    # four streams, one reading per frame (and at most one frame on its way at each end)
    assert reads_after - reads_before <= (last - first) + 2
    assert all("board" in v.events for v in viewers)
    common = set(viewers[0].ids)
    for v in viewers[1:]:
        common &= set(v.ids)
    assert len(common) >= 5, [v.ids for v in viewers]  # the very same frames on every stream


def test_distinct_filters_get_their_own_board_reading(
    board_server, console_keys, sessions, streams, make_match
):
    make_match(status="inprogress", sr_id="sr:match:feed-a")
    client = _session(board_server, console_keys["operator"], sessions)
    other = _session(board_server, console_keys["operator"], sessions)
    a = _open(streams, client, {"q": "feed-a"})
    b = _open(streams, other, {"q": "feed-b"})
    b2 = _open(streams, other, {"q": "feed-b"})
    wait_for(lambda: min(len(a.ids), len(b.ids), len(b2.ids)) >= 2, timeout=60, what="frames on each stream")
    reads_before = _metric(board_server, "kickoff_console_board_reads_total")
    a0, b0 = a.ids[-1], b.ids[-1]
    wait_for(lambda: a.ids[-1] >= a0 + 6 and b.ids[-1] >= b0 + 6, timeout=120, what="six frames of each")
    reads_after = _metric(board_server, "kickoff_console_board_reads_total")
    frames = (a.ids[-1] - a0) + (b.ids[-1] - b0)
    assert frames - 4 <= reads_after - reads_before <= frames + 4  # a reading per filter, not per stream
    assert set(b.ids) & set(b2.ids)


def test_a_session_past_its_stream_cap_is_429_until_one_of_its_streams_closes(
    board_server, console_keys, sessions, streams
):
    mine = _session(board_server, console_keys["read"], sessions)
    first = [_open(streams, mine) for _ in range(PER_SESSION)]
    refused = mine.client.get("/events/board")
    assert refused.status_code == 429 and "CONSOLE_STREAMS_PER_SESSION" in refused.json()["error"]
    someone_else = _session(board_server, console_keys["read"], sessions)
    _open(streams, someone_else)
    first[0].close()

    def accepted() -> bool:
        with mine.client.stream("GET", "/events/board") as answer:
            return answer.status_code == 200

    wait_for(accepted, timeout=60, what="a stream of the session once one of its streams closed")


def _api_backends() -> tuple[int, set[int]]:
    with psycopg2.connect(dbname="postgres", user="postgres", host="127.0.0.1") as conn, conn.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP_NAME,))
        pids = {row[0] for row in cur.fetchall()}
    conn.close()
    return len(pids), pids


def test_thirty_streams_keep_the_api_within_its_pool_and_one_past_the_process_cap_is_429(
    board_server, console_keys, sessions, streams, make_match
):
    for n in range(20):
        match = make_match(status="inprogress", sr_id=f"sr:match:pool-{n}")
        MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    clients = [_session(board_server, console_keys["operator"], sessions) for _ in range(PER_PROCESS // 2)]
    filters = [{}, {"active": "1"}, {"q": "pool-1"}]
    for i, client in enumerate(clients):
        for j in range(PER_SESSION):
            _open(streams, client, filters[(i + j) % len(filters)])
    seen: set[int] = set()
    most = 0
    first = streams[0].ids[-1] if streams[0].ids else 0

    def sampled() -> bool:
        nonlocal most
        count, pids = _api_backends()
        most = max(most, count)
        seen.update(pids)
        return bool(streams[0].ids) and streams[0].ids[-1] >= first + 15

    wait_for(sampled, timeout=90, interval=0.02, what="fifteen frames while sampling pg_stat_activity")
    assert all(s.ids for s in streams)
    assert most <= POOL, most
    assert len(seen) <= POOL, seen  # the same pooled connections, none opened per reading
    late = _session(board_server, console_keys["operator"], sessions)
    refused = late.client.get("/events/board")
    assert refused.status_code == 429 and "CONSOLE_STREAMS_PER_PROCESS" in refused.json()["error"]


def test_metrics_are_served_from_the_cache_within_the_window_and_read_again_after_it(
    board_server, make_match
):
    match = make_match(status="inprogress")
    reads = _metric(board_server, "kickoff_metrics_shared_state_reads_total")
    _, starts = wait_for(
        lambda: (
            _metric(board_server, "kickoff_metrics_shared_state_reads_total") > reads
            and (True, _metric(board_server, "kickoff_listener_starts_total"))
        ),
        timeout=60,
        what="a fresh reading of the shared state",
    )
    reads = _metric(board_server, "kickoff_metrics_shared_state_reads_total")
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    assert _metric(board_server, "kickoff_listener_starts_total") == starts  # the figures read last
    wait_for(
        lambda: _metric(board_server, "kickoff_listener_starts_total") == starts + 1,
        timeout=60,
        what="the new run counted once the window passed",
    )
    assert _metric(board_server, "kickoff_metrics_shared_state_reads_total") == reads + 1


def _vhost_connections(vhost: str) -> set[str]:
    out = subprocess.run(
        ["rabbitmqctl", "-q", "list_connections", "vhost", "name"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    found = set()
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[0] == vhost:
            found.add(parts[1])
    return found


def _server_amqp_ends(server: Server) -> set[str]:
    """``host:port`` of the server process's own connections to RabbitMQ."""
    import psutil

    process = psutil.Process(server.process.pid)
    return {
        f"{c.laddr.ip}:{c.laddr.port}"
        for p in (process, *process.children(recursive=True))
        for c in p.net_connections(kind="tcp")
        if c.raddr and c.raddr.port == 5672
    }


def test_readyz_is_kept_two_seconds_and_reuses_one_amqp_connection(board_server, fresh_queues, test_env):
    vhost = test_env["AMQP_URL"].rsplit("/", 1)[1]
    # A round probed before fresh_queues declared the queues (the module's server outlives tests)
    # is kept its two seconds too: wait for a ready answer, then count.
    wait_for(
        lambda: httpx.get(board_server.url + "/readyz", timeout=60).status_code == 200,
        timeout=60,
        interval=0.5,
        what="a ready answer",
    )
    probes = _metric(board_server, "kickoff_readiness_probes_total")
    answers = [httpx.get(board_server.url + "/readyz", timeout=60) for _ in range(5)]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    # kept: not probed five times
    assert _metric(board_server, "kickoff_readiness_probes_total") - probes <= 2
    connections = [_vhost_connections(vhost)]
    target = _metric(board_server, "kickoff_readiness_probes_total") + 2

    def probed_again() -> bool:
        assert httpx.get(board_server.url + "/readyz", timeout=60).status_code == 200
        return _metric(board_server, "kickoff_readiness_probes_total") >= target

    wait_for(probed_again, timeout=60, interval=0.5, what="two more rounds of probes")
    connections.append(_vhost_connections(vhost))
    # the server's own (this test process may hold connections to the vhost too)
    mine = _server_amqp_ends(board_server)
    servers = [{c for c in found if c.split(" -> ")[0] in mine} for found in connections]
    assert len(servers[0]) == 1 and servers[0] == servers[1], (connections, mine)


def test_a_row_that_changes_in_place_is_sent_alone_after_the_first_full_board(
    board_server, console_keys, sessions, streams, make_match
):
    running = make_match(status="inprogress", sr_id="sr:match:delta-running")
    quiet = make_match(status="inprogress", sr_id="sr:match:delta-quiet")
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=running.id)  # its heartbeat age grows
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=quiet.id, ended_at=utcnow(), exit_code=0)
    client = _session(board_server, console_keys["operator"], sessions)
    data: list[str] = []
    with client.client.stream("GET", "/events/board", params={"q": "delta-"}) as answer:
        event = None
        for line in answer.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event in ("board", "rows"):
                data.append(f"{event} {line[6:]}")
                if event == "rows" or len(data) >= 10:
                    break
    assert data[0].startswith("board ") and str(quiet.id) in data[0] and str(running.id) in data[0]
    assert data[-1].startswith("rows ") and str(running.id) in data[-1] and str(quiet.id) not in data[-1]
