"""The outbox under partitions: an API host cut from RabbitMQ, then from PostgreSQL, mid-load.

A real `kickoff serve` and the outbox drain (tests/publisher/drain_loop.py, the periodic actor's
work as its own process) run on one test host (harness/hosts.py: a network namespace of its own)
and reach PostgreSQL, RabbitMQ and Redis only through that host's proxies; a cut is iptables
dropping (black hole) or rejecting (refusal) the host's packets to one of them. Four clients
post triggers (lineup, waiver, draft pick; every one with its own idempotency key) the whole
time. The host is cut from RabbitMQ (black hole, then refused), healed, then cut from PostgreSQL
(black hole, then refused), healed. Each cut lasts at least MIN_CUT_SECONDS and until every
client got answers to triggers it sent during the cut; after each heal the test waits until
every client is answered ``queued`` again and what the cut saved is delivered. Then every
trigger not answered 2xx is sent again with its key (the contract's "retry with the same key")
and every queue is consumed (a consumer on the shared broker, from the start).

What the contract (docs/publisher.md, docs/asyncapi.yaml) promises and the test asserts:

* every answer comes within ANSWER_DEADLINE_SECONDS, none is a client timeout;
* 202 ``queued`` only after the broker's confirm: no trigger sent and answered inside a
  RabbitMQ cut is ``queued`` (lineup and waiver say ``pending``, a draft pick 503 with its
  tracking id); a ``queued`` message is delivered and never twice;
* inside a PostgreSQL cut every answer is 503 with the error body (``retryable``), nothing saved;
* after the heal every trigger answered 202/200 is delivered, exactly one message id per key,
  and every delivered message belongs to a trigger whose client was given its tracking id;
  a message id may arrive twice only where the contract allows it (published, then the mark
  lost with the link: never for a ``queued`` answer), the consumer drops it by message id.

The figures (triggers, answers per kind, duplicates, slowest answer, time from each heal to the
delivery of what its cut saved and to every client's next ``queued``) are printed for
docs/reliability.md (``-s``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest

from api.keys import Scope, create_key
from cli.processes import ChildProcess
from harness.hosts import CutKind, HostNetwork, TestHost
from models.db import connection_scope, database
from publisher.queues import DRAFT_TARGETS, LINEUP_UPDATES, WAIVER_ACTIONS
from tests.waiting import wait_for

pytestmark = [pytest.mark.partition, pytest.mark.timeout(420)]

REPO = Path(__file__).resolve().parents[2]
CLIENTS = 4
PACE_SECONDS = 0.05  # between one client's triggers (load, not waiting for a condition)
CLIENT_TIMEOUT_SECONDS = 60.0  # the clients' HTTP timeout: an answer later than this is a hang
#: No answer may take longer. The slowest path is a PostgreSQL black hole: a request may meet the
#: client-side statement deadline (statement timeout 5 s + connect timeout 2 s, HOST_ENV) three
#: times (its key's lookup, the group-commit batch in flight before its own, its own batch), each
#: followed by a connect timeout; RabbitMQ's worst is a connect plus a confirm timeout.
ANSWER_DEADLINE_SECONDS = 40.0
ANSWERS_PER_CLIENT_IN_CUT = 3  # a cut lasts until each client got this many answers sent inside it
MIN_CUT_SECONDS = 8.0  # and at least this long (many drain runs and publisher reconnects inside it)
QUEUED_PER_CLIENT_AFTER_HEAL = 5  # and after the heal until each got this many ``queued`` answers
DELIVERY_DEADLINE_SECONDS = 90.0
#: What a cut saved is delivered this soon after the heal: the drain runs every 0.5 s and a row
#: backs off at most OUTBOX_BACKOFF_MAX_SECONDS (2 s); generous for a loaded machine.
DELIVERY_AFTER_HEAL_SECONDS = 15.0
QUEUES = (LINEUP_UPDATES, WAIVER_ACTIONS, DRAFT_TARGETS)
KINDS = {"lineup": LINEUP_UPDATES, "waiver": WAIVER_ACTIONS, "draft-pick": DRAFT_TARGETS}

#: Settings of the host's processes: short publisher timeouts and backoff, realistic grace.
HOST_ENV = {
    "OUTBOX_IMMEDIATE_GRACE_SECONDS": "1",
    "OUTBOX_BACKOFF_BASE_SECONDS": "0.2",
    "OUTBOX_BACKOFF_MAX_SECONDS": "2",
    "AMQP_CONFIRM_TIMEOUT_SECONDS": "2",
    "AMQP_CONNECT_TIMEOUT_SECONDS": "2",
    "DATABASE_CONNECT_TIMEOUT_SECONDS": "2",
    "DATABASE_STATEMENT_TIMEOUT_SECONDS": "5",
    "DRAIN_LOOP_INTERVAL_SECONDS": "0.5",
    "LOG_LEVEL": "INFO",
    "PYTHONUNBUFFERED": "1",
}

SERVER_PORT = 8000  # inside the host's own namespace: nothing else listens there


def _stop(process: ChildProcess) -> None:
    """SIGTERM (a graceful stop), SIGKILL if it does not end."""
    if process.running():
        try:
            process.terminate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _start_server(host: TestHost, env: dict[str, str], log: Path) -> tuple[ChildProcess, str]:
    """`kickoff serve` on the host, bound to its address; its base URL once /healthz answers."""
    argv = [sys.executable, "-m", "cli", "serve", "--host", host.address, "--port", str(SERVER_PORT)]
    process = host.run(argv, env=env, log=log, cwd=REPO)
    url = f"http://{host.address}:{SERVER_PORT}"

    def up() -> bool:
        if not process.running():
            raise AssertionError(f"kickoff serve exited: {process.output()}")
        try:
            return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, timeout=90, what="kickoff serve on the test host to answer /healthz")
    return process, url


@dataclass
class Answer:
    """One trigger a client sent and what it was told (``status`` None: no HTTP answer)."""

    client: int
    kind: str
    key: str
    body: dict[str, Any]
    sent_at: float
    answered_at: float = 0.0
    status: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def seconds(self) -> float:
        return self.answered_at - self.sent_at

    @property
    def accepted(self) -> bool:
        return self.status in (200, 202)

    @property
    def answer(self) -> str:
        """``queued``, ``pending``, ``duplicate``, ``503``... or ``no answer``."""
        if self.status is None:
            return "no answer"
        return str(self.data.get("status")) if self.accepted else str(self.status)

    def inside(self, start: float, end: float) -> bool:
        return start <= self.sent_at and self.answered_at <= end


def _body(kind: str, client: int, n: int) -> dict[str, Any]:
    key = f"c{client}-{kind}-{n}"
    team = {"league_id": f"L{client}", "team_id": str(client), "idempotency_key": key}
    if kind == "lineup":
        return {**team, "swaps": [{"player_id": 3_000_000 + n, "to_slot": "BN"}]}
    if kind == "waiver":
        return {**team, "add_player_id": 4_000_000 + n}
    return {**team, "pick_number": n + 1, "espn_id": 5_000_000 + n}


def post(http: httpx.Client, answer: Answer) -> Answer:
    """Send ``answer``'s trigger and record what came back."""
    try:
        response = http.post(f"/v1/trigger/{answer.kind}", json=answer.body)
    except httpx.HTTPError as exc:
        answer.error = f"{type(exc).__name__}: {exc}"
    else:
        answer.status = response.status_code
        try:
            answer.data = response.json()
        except ValueError:
            answer.data = {"text": response.text[:300]}
    answer.answered_at = time.monotonic()
    return answer


class Clients:
    """CLIENTS threads posting triggers to the host's API until stopped, every answer recorded."""

    def __init__(self, url: str, api_key: str) -> None:
        self.url = url
        self.api_key = api_key
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(CLIENTS)]

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=CLIENT_TIMEOUT_SECONDS)

    def _run(self, client: int) -> None:
        kinds = list(KINDS)
        with self.client() as http:
            n = 0
            while not self._stop.is_set():
                kind = kinds[(n + client) % len(kinds)]
                answer = Answer(
                    client, kind, f"c{client}-{kind}-{n}", _body(kind, client, n), time.monotonic()
                )
                post(http, answer)
                with self._lock:
                    self.answers.append(answer)
                n += 1
                self._stop.wait(PACE_SECONDS)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(CLIENT_TIMEOUT_SECONDS + 10)
        assert not any(t.is_alive() for t in self._threads), "a client is still waiting for an answer"

    def snapshot(self) -> list[Answer]:
        with self._lock:
            return list(self.answers)

    def each_client_has(self, count: int, since: float, *, answer: str | None = None) -> bool:
        """Whether every client got ``count`` answers (``answer`` ones) to triggers sent after ``since``."""
        per_client = Counter(
            a.client for a in self.snapshot() if a.sent_at >= since and (answer is None or a.answer == answer)
        )
        return all(per_client[c] >= count for c in range(CLIENTS))


@dataclass(frozen=True)
class Delivery:
    queue: str
    message_id: str
    tracking_id: str
    at: float


class Consumer:
    """Consumes the three outbox queues on the shared broker (not through the host) from the start."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import json

        try:
            connection = pika.BlockingConnection(pika.URLParameters(self.url))
            channel = connection.channel()
            for queue in QUEUES:

                def on_message(
                    ch: Any, method: Any, properties: Any, body: bytes, queue: str = queue
                ) -> None:
                    tracking_id = json.loads(body).get("tracking_id")
                    delivery = Delivery(queue, properties.message_id, str(tracking_id), time.monotonic())
                    with self._lock:
                        self.deliveries.append(delivery)

                channel.basic_consume(queue=queue, on_message_callback=on_message, auto_ack=True)
            self._ready.set()
            while not self._stop.is_set():
                connection.process_data_events(time_limit=0.2)
            connection.close()
        except BaseException as exc:  # reported by the test
            self.error = exc
            self._ready.set()

    def __enter__(self) -> Consumer:
        self._thread.start()
        assert self._ready.wait(30) and self.error is None, f"the consumer did not start: {self.error}"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def snapshot(self) -> list[Delivery]:
        assert self.error is None, f"the consumer failed: {self.error!r}"
        with self._lock:
            return list(self.deliveries)


@dataclass
class Cut:
    """One partition of the host: the service, black hole or refusal, when it began and healed."""

    service: str  # a harness.hosts service name: "amqp" (RabbitMQ) or "database" (PostgreSQL)
    how: CutKind
    cut_at: float = 0.0  # its rules in force (harness.hosts records it once iptables added them)
    healing_at: float = 0.0  # just before the rules are removed: [cut_at, healing_at] is surely cut
    healed_at: float = 0.0  # the rules gone

    def inside(self, answer: Answer) -> bool:
        """Whether ``answer``'s trigger was sent and answered while the cut surely held."""
        return answer.inside(self.cut_at, self.healing_at)

    @property
    def name(self) -> str:
        return f"{SERVICE_NAMES[self.service]} {self.how}"


SERVICE_NAMES = {"amqp": "RabbitMQ", "database": "PostgreSQL"}
CUTS = (
    Cut("amqp", "blackhole"),
    Cut("amqp", "refuse"),
    Cut("database", "blackhole"),
    Cut("database", "refuse"),
)


def _pending_rows() -> int:
    with connection_scope():
        return database.execute_sql(
            "SELECT count(*) FROM outbox_messages WHERE status = 'pending'"
        ).fetchone()[0]


def _queue_depths(url: str) -> int:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        return sum(channel.queue_declare(queue=q, passive=True).method.message_count for q in QUEUES)
    finally:
        connection.close()


@pytest.fixture
def partition_env(test_env: dict[str, str], migrated_database: str, amqp_vhost: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(test_env)
    env.update(HOST_ENV)
    return env


def test_an_api_host_cut_from_rabbitmq_then_postgres_answers_truthfully_and_loses_nothing(
    partition_env: dict[str, str],
    db: str,
    fresh_queues: None,
    amqp_vhost: str,
    host_network: HostNetwork,
    tmp_path: Path,
) -> None:
    api_key = create_key(name="partition-clients", scope=Scope.TRIGGER)[1]
    database.close()
    cuts = [Cut(c.service, c.how) for c in CUTS]
    host = host_network.add_host("api")
    with Consumer(amqp_vhost) as consumer:
        env = host.env(partition_env)
        server, url = _start_server(host, env, tmp_path / "serve.log")
        drain = host.run(
            [sys.executable, "-m", "tests.publisher.drain_loop"],
            env=env,
            log=tmp_path / "drain.log",
            cwd=REPO,
        )
        clients = Clients(url, api_key)
        try:
            clients.start()
            started = time.monotonic()
            wait_for(
                lambda: clients.each_client_has(QUEUED_PER_CLIENT_AFTER_HEAL, started, answer="queued"),
                timeout=60,
                what="every client answered queued before the first cut",
            )
            for cut in cuts:
                host.cut(cut.service, kind=cut.how)
                cut.cut_at = host.cuts[-1].at
                wait_for(
                    lambda cut=cut: (
                        clients.each_client_has(ANSWERS_PER_CLIENT_IN_CUT, cut.cut_at)
                        and time.monotonic() - cut.cut_at >= MIN_CUT_SECONDS
                    ),
                    timeout=90,
                    what=f"every client answered during the {cut.name} cut",
                )
                cut.healing_at = time.monotonic()
                host.heal(cut.service)
                cut.healed_at = time.monotonic()
                wait_for(
                    lambda cut=cut: clients.each_client_has(
                        QUEUED_PER_CLIENT_AFTER_HEAL, cut.healed_at, answer="queued"
                    ),
                    timeout=90,
                    what=f"every client answered queued again after the {cut.name} cut healed",
                )
                wait_for(
                    lambda: _told(clients.snapshot()) <= {d.tracking_id for d in consumer.snapshot()},
                    timeout=DELIVERY_DEADLINE_SECONDS,
                    what=f"every trigger saved before the {cut.name} cut healed delivered",
                )
        finally:
            clients.stop()
        first = clients.snapshot()
        retries = _retry_unaccepted(clients, first)
        accepted = {a.key: a for a in [*first, *retries] if a.accepted}
        expected = {a.data["tracking_id"] for a in accepted.values()}
        try:
            wait_for(
                lambda: (
                    expected <= {d.tracking_id for d in consumer.snapshot()}
                    and _pending_rows() == 0
                    and _queue_depths(amqp_vhost) == 0
                ),
                timeout=DELIVERY_DEADLINE_SECONDS,
                what="every accepted trigger delivered, the outbox empty, every queue consumed",
            )
        finally:
            _stop(drain)
            _stop(server)
        deliveries = consumer.snapshot()
    _check(first, retries, deliveries, cuts, tmp_path)


def _told(answers: list[Answer]) -> set[str]:
    """The tracking ids the clients were given (202/200, and a draft pick's 503 naming its saved target)."""
    return {str(a.data["tracking_id"]) for a in answers if a.data.get("tracking_id")}


def _retry_unaccepted(clients: Clients, first: list[Answer]) -> list[Answer]:
    """Send every trigger not answered 2xx again with its key until it is (the contract's retry)."""
    retries: list[Answer] = []
    with clients.client() as http:
        for original in first:
            if original.accepted:
                continue

            def again(original: Answer = original) -> Answer | None:
                answer = post(
                    http,
                    Answer(original.client, original.kind, original.key, original.body, time.monotonic()),
                )
                retries.append(answer)
                return answer if answer.accepted else None

            wait_for(again, timeout=60, interval=0.5, what=f"the retry of {original.key} accepted")
    return retries


def _answers_inside(first: list[Answer], cut: Cut) -> str:
    """The answers to triggers sent and answered during ``cut``, by kind, and the slowest of them."""
    inside = [a for a in first if cut.inside(a)]
    kinds = dict(sorted(Counter(a.answer for a in inside).items()))
    return f"{kinds}, slowest {max((a.seconds for a in inside), default=0.0):.1f}s"


def _phase(at: float, cuts: list[Cut]) -> str:
    """Where ``at`` falls: during a cut, or after which heal."""
    for cut in reversed(cuts):
        if cut.cut_at <= at <= cut.healed_at:
            return f"during {cut.name}"
        if at > cut.healed_at:
            return f"after {cut.name}"
    return "before the cuts"


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in values.items()}


def _check(
    first: list[Answer], retries: list[Answer], deliveries: list[Delivery], cuts: list[Cut], logs: Path
) -> None:
    problems: list[str] = []

    def expect(ok: bool, what: str, items: list[Any]) -> None:
        if not ok:
            problems.append(f"{what}: {len(items)}, e.g. {items[:3]}")

    every = [*first, *retries]
    late = [a for a in every if a.status is None or a.seconds > ANSWER_DEADLINE_SECONDS]
    expect(not late, f"answers missing or later than {ANSWER_DEADLINE_SECONDS} s", late)
    odd = [a for a in first if a.status not in (202, 503)]  # a fresh key: never a duplicate, never a 500
    expect(not odd, "first answers neither 202 nor 503", odd)
    untold = [a for a in every if a.status == 503 and not (a.data.get("error") and a.data.get("retryable"))]
    expect(not untold, "503 answers without the error body (error, retryable)", untold)
    half = [
        a
        for a in every
        if a.answer in ("queued", "pending") and a.data.get("published") != (a.answer == "queued")
    ]
    expect(not half, "202 answers whose published flag contradicts their status", half)

    for cut in cuts:
        inside = [a for a in first if cut.inside(a)]
        expect(bool(inside), f"answers to triggers sent during the {cut.name} cut", inside)
        if cut.service == "amqp":
            queued = [a for a in inside if a.answer == "queued"]
            expect(not queued, f"queued during the {cut.name} cut (no confirm can come)", queued)
            wrong = [
                a
                for a in inside
                if not (
                    (a.kind != "draft-pick" and a.answer == "pending")
                    or (a.kind == "draft-pick" and a.status == 503 and a.data.get("tracking_id"))
                )
            ]
            expect(
                not wrong, f"answers during the {cut.name} cut other than pending / 503 with its id", wrong
            )
        else:
            saved = [a for a in inside if a.status != 503]
            expect(not saved, f"answers other than 503 during the {cut.name} cut", saved)

    # Which key each tracking id was given for (202/200 bodies, and a draft pick's 503 body).
    key_of: dict[str, str] = {}
    for a in every:
        if a.data.get("tracking_id"):
            key_of[str(a.data["tracking_id"])] = a.key
    final = {a.key: str(a.data["tracking_id"]) for a in every if a.accepted}  # the last accepted answer wins
    first_of = {a.key: a for a in first}
    copies = Counter(d.message_id for d in deliveries)
    ids_of: dict[str, set[str]] = defaultdict(set)
    tracking_of_key: dict[str, set[str]] = defaultdict(set)
    unknown = []
    for d in deliveries:
        ids_of[d.tracking_id].add(d.message_id)
        if d.tracking_id in key_of:
            tracking_of_key[key_of[d.tracking_id]].add(d.tracking_id)
        else:
            unknown.append(d)
    expect(not unknown, "messages delivered whose tracking id no client was given", unknown)
    lost = [k for k, t in final.items() if t not in ids_of]
    expect(not lost, "accepted triggers never delivered", lost)
    doubled = [k for k, ts in tracking_of_key.items() if len(ts) != 1 or len(ids_of[next(iter(ts))]) != 1]
    expect(not doubled, "keys delivered as more than one message id", doubled)
    switched = [k for k, ts in tracking_of_key.items() if ts != {final.get(k)}]
    expect(not switched, "keys whose delivered tracking id is not the one the client was given", switched)
    repeated = [m for m, n in copies.items() if n > 1]
    queued_twice = [
        m
        for m in repeated
        if any(first_of[key_of[d.tracking_id]].answer == "queued" for d in deliveries if d.message_id == m)
    ]
    expect(not queued_twice, "message ids of queued answers delivered twice", queued_twice)

    # An answer 503 in a PostgreSQL cut whose retry said duplicate: the commit went through while the
    # link went down (in doubt to the server too); the retry with its key found it, nothing doubled.
    # A 503 in a PostgreSQL cut whose retry said duplicate: the save's COMMIT reached the server as
    # the link went down (in doubt to kickoff too); the retry with the key found it, nothing doubled.
    pg_cuts = [c for c in cuts if c.service == "database"]
    in_doubt = [
        a.key
        for a in first
        if a.status == 503
        and any(c.cut_at <= a.sent_at <= c.healed_at for c in pg_cuts)
        and any(r.key == a.key and r.answer == "duplicate" for r in retries)
    ]
    first_delivery: dict[str, float] = {}
    for d in deliveries:
        first_delivery.setdefault(d.tracking_id, d.at)
    to_delivery: dict[str, float] = {}  # heal -> delivery of what was saved, unconfirmed, during the cut
    recovered: dict[str, float] = {}  # heal -> the last client's first queued answer
    for cut in cuts:
        saved = _told([a for a in first if cut.cut_at <= a.sent_at <= cut.healed_at and a.answer != "queued"])
        delays = [first_delivery[t] - cut.healed_at for t in saved if t in first_delivery]
        to_delivery[cut.name] = max(delays, default=0.0)
        firsts = [
            min(
                a.answered_at
                for a in first
                if a.client == c and a.sent_at >= cut.healed_at and a.answer == "queued"
            )
            for c in range(CLIENTS)
        ]
        recovered[cut.name] = max(firsts) - cut.healed_at
    slow = {k: v for k, v in to_delivery.items() if v > DELIVERY_AFTER_HEAL_SECONDS}
    expect(
        not slow,
        f"messages saved during a cut delivered later than {DELIVERY_AFTER_HEAL_SECONDS} s after the heal",
        [slow],
    )
    answers = Counter(f"{a.kind}:{a.answer}" for a in first)
    second_copies = Counter(
        f"{first_of[key_of[d.tracking_id]].answer} answer, later copy {_phase(d.at, cuts)}"
        for m in repeated
        for d in sorted((d for d in deliveries if d.message_id == m), key=lambda d: d.at)[1:]
    )
    print(
        f"\noutbox partitions: triggers={len(first)} retried={len({r.key for r in retries})} "
        f"accepted={len(final)} delivered={len(copies)} duplicates={len(deliveries) - len(copies)} "
        f"in_doubt={len(in_doubt)} slowest_answer={max(a.seconds for a in every):.1f}s\n"
        f"  cuts (s)={_rounded({c.name: c.healed_at - c.cut_at for c in cuts})}\n"
        f"  heal to delivery of the cut's saved messages (s)={_rounded(to_delivery)}\n"
        f"  heal to every client's first queued answer (s)={_rounded(recovered)}\n"
        f"  first answers={dict(sorted(answers.items()))}\n"
        f"  second copies={dict(sorted(second_copies.items()))}"
        + "".join(f"\n  answered during {c.name}: {_answers_inside(first, c)}" for c in cuts)
    )
    if problems:
        logs_text = "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in logs.glob("*.log")
        )
        raise AssertionError("\n".join(problems) + "\n" + logs_text)
