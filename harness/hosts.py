"""Test hosts: processes on network namespaces of their own, reaching the services through proxies.

``HostNetwork`` creates one network namespace per test host (``ko-<run id>-h<n>``), a veth pair
per host on a private /30 of 10.213.0.0/16 (``10.213.<n>.1`` on the host side, ``10.213.<n>.2``
inside the namespace; no route beyond it) and loopback up inside. For each service a host uses
(``expose``, or ``env`` for every URL setting of an environment), a ``harness.faultproxy.FaultProxy``
bound to the host's veth address forwards to the real service on loopback; the host's processes
(``run``: ``ip netns exec``) see only those addresses. The shared services never see the faults.

Partitions are real packet drops inside the host's namespace (iptables):

* ``cut(service, kind="blackhole")``: packets to and from the service's proxy are dropped, open
  connections stay open (their reads wait, their writes are retransmitted in vain).
* ``cut(service, kind="refuse")``: new connects are refused with a TCP reset and the open ones
  are reset (``FaultProxy.cut``).
* ``heal(service)``: the rules go; a black-holed connection carries on where it stopped.

``service`` is one name of ``SERVICES`` (``database``, ``redis``, ``broker``, ``amqp``, ``feed``),
several, or ``"all"`` (every service the host exposes). ``TestHost.start_worker`` starts a real
``dramatiq`` worker on the host; every cut is recorded (``cuts``, ``cut_periods``), and a heal of
a black hole resets at once on the proxy the connections the host closed meanwhile
(``given_up``). ``HostNetwork.streaming_periods`` turns srsim's ``stream_history`` into the spans
each host's stream of a match could carry bytes; ``most_concurrent`` gives, per match, the most
streams at one instant (the "never two streams" check, observed from the feed's side).

Everything is removed at the end, also on failure: the context manager,
the ``host_network`` fixture (tests/conftest.py) and an atexit hook close the network (its
processes killed, its proxies stopped, its namespaces deleted; a namespace takes its veth and
its rules with it). A new network also deletes namespaces ``ko-<pid>-...`` whose creating
process is gone (a crashed earlier run). Needs root and iproute2 and iptables
(``missing_requirements`` says what is missing; scripts/test installs both).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from cli.processes import ChildProcess, dramatiq_worker_argv
from harness.faultproxy import FaultProxy

logger = logging.getLogger(__name__)

#: Service name -> the setting holding its URL (every URL setting a kickoff process reads).
SERVICES: dict[str, str] = {
    "database": "DATABASE_URL",
    "redis": "REDIS_URL",
    "broker": "BROKER_URL",
    "amqp": "AMQP_URL",
    "feed": "SPORTRADAR_BASE_URL",
}
#: The private range the veth pairs take their /30s from (checked unused on this machine).
SUBNET = ipaddress.ip_network("10.213.0.0/16")
NAMESPACE_PREFIX = "ko-"
_LOCK_FILE = Path("/run/kickoff-test-hosts.lock")  # one allocation of a subnet index at a time
_NAME = re.compile(r"^ko-(?P<pid>\d+)-[0-9a-f]+-h\d+$")

CutKind = Literal["blackhole", "refuse"]


class HostSetupError(RuntimeError):
    """A namespace, veth or rule could not be made (the command's output says why)."""


def missing_requirements() -> str | None:
    """Why test hosts cannot be made here (not root, no ``ip``, no ``iptables``), or None."""
    if os.geteuid() != 0:
        return "test hosts need root (network namespaces, veth pairs, iptables)"
    for tool in ("ip", "iptables"):
        if _which(tool) is None:
            return f"test hosts need {tool} (scripts/test installs it: apt-get install -y " + (
                "iproute2)" if tool == "ip" else "iptables)"
            )
    return None


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = (_which(argv[0]) or argv[0], *argv[1:])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise HostSetupError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def namespaces() -> list[str]:
    """The network namespaces of this machine (``ip netns list``)."""
    out = _sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _delete_namespace(name: str) -> None:
    """Kill what still runs in namespace ``name``, then delete it (its veth and rules go with it)."""
    pids = _sh("ip", "netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
            os.kill(int(pid), signal.SIGKILL)
    _sh("ip", "netns", "delete", name, check=False)


def sweep_stale_namespaces() -> list[str]:
    """Delete the ``ko-<pid>-...`` namespaces whose creating process is gone; their names."""
    swept = []
    for name in namespaces():
        found = _NAME.match(name)
        if found and not _pid_alive(int(found["pid"])):
            _delete_namespace(name)
            swept.append(name)
    return swept


def _used_indexes() -> set[int]:
    """The third octets of every 10.213.x.y address on this machine (in use by another network)."""
    out = _sh("ip", "-o", "-4", "addr", "show", check=False).stdout
    used = set()
    for found in re.finditer(r"inet (10\.213\.(\d+)\.\d+)/", out):
        used.add(int(found.group(2)))
    return used


@dataclass
class CutRecord:
    """One partition of a host from one service: ``time.monotonic()`` when cut and healed."""

    service: str
    kind: CutKind
    at: float
    healed: float | None = None  # None while in force


@dataclass(eq=False)
class TestHost:
    """One test host: a namespace, its veth pair, its proxies, its rules and its processes."""

    __test__ = False  # not a pytest test class

    name: str  # e.g. "h1"
    namespace: str  # ko-<pid>-<hex>-h1
    index: int  # third octet of its /30
    veth: str  # the host-side interface (its peer, ``veth + "n"``, is in the namespace)
    proxies: dict[str, FaultProxy] = field(default_factory=dict)
    processes: list[ChildProcess] = field(default_factory=list)
    cuts: list[CutRecord] = field(default_factory=list)  # every partition, in the order made
    #: service -> upstream ports of the connections this host gave up while black-holed from it
    #: (closed on its side, so never streaming again): ``heal`` resets them on the proxy at once.
    given_up: dict[str, set[int]] = field(default_factory=dict)
    #: Every give-up in order, ``(service, upstream port)``: a port the host gave up, reused later
    #: and given up again is listed twice (``given_up`` holds it once).
    given_up_log: list[tuple[str, int]] = field(default_factory=list)
    _rules: dict[str, list[list[str]]] = field(default_factory=dict)  # service -> iptables rule specs
    _mu: threading.Lock = field(default_factory=threading.Lock)

    @property
    def host_address(self) -> str:
        """The host side of the veth pair: where this host's proxies listen."""
        return f"10.213.{self.index}.1"

    @property
    def address(self) -> str:
        """The host's own address inside its namespace."""
        return f"10.213.{self.index}.2"

    # -- services ------------------------------------------------------------------------

    def expose(self, service: str, url: str) -> str:
        """``url`` (a service on loopback) as this host reaches it: through its proxy for ``service``.

        The proxy is made on first use; a later call for the same service returns its address
        again (its target must be the same).
        """
        parts = urlsplit(url)
        target = (parts.hostname or "127.0.0.1", parts.port or _default_port(parts.scheme))
        if target[0] not in ("127.0.0.1", "localhost"):
            raise HostSetupError(f"{service}: only services on loopback are exposed, not {target[0]}")
        with self._mu:
            proxy = self.proxies.get(service)
            if proxy is None:
                proxy = FaultProxy(("127.0.0.1", target[1]), host=self.host_address).start()
                self.proxies[service] = proxy
            elif proxy.target[1] != target[1]:
                raise HostSetupError(f"{service}: already exposed for port {proxy.target[1]}")
        userinfo = parts.netloc.rpartition("@")[0]
        address = f"{self.host_address}:{proxy.port}"
        netloc = f"{userinfo}@{address}" if userinfo else address
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with every service URL of ``SERVICES`` in it pointed at this host's proxies."""
        out = dict(env)
        for service, setting in SERVICES.items():
            if out.get(setting):
                out[setting] = self.expose(service, out[setting])
        return out

    # -- processes -----------------------------------------------------------------------

    def argv(self, argv: Iterable[str]) -> list[str]:
        """``argv`` run inside this host's namespace."""
        return [_which("ip") or "ip", "netns", "exec", self.namespace, *argv]

    def run(
        self, argv: Iterable[str], *, env: Mapping[str, str], log: Path, cwd: str | Path | None = None
    ) -> ChildProcess:
        """Start ``argv`` inside the namespace (its own process group; killed when the network closes).

        ``env`` is given as it is: point it at this host's proxies first (``env``).
        """
        child = ChildProcess(self.argv(argv), env=env, log=log, cwd=cwd)
        self.processes.append(child)
        return child

    def start_worker(
        self,
        env: Mapping[str, str],
        log: Path,
        *,
        queues: tuple[str, ...] = ("match_listeners",),
        threads: int = 4,
        ready_timeout: float = 60.0,
    ) -> ChildProcess:
        """A real ``dramatiq actors`` worker on this host (``env`` pointed at its proxies); once ready."""
        argv = dramatiq_worker_argv(*queues, threads=threads, shutdown_timeout_ms=10000)
        child = self.run(argv, env=self.env(env), log=log, cwd=Path(__file__).resolve().parents[1])
        deadline = time.monotonic() + ready_timeout
        while "ready for action" not in child.output():
            if not child.running() or time.monotonic() > deadline:
                raise HostSetupError(f"host {self.name}: worker not ready: {child.last_lines(20)}")
            time.sleep(0.1)
        return child

    def exec(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a short command inside the namespace and wait for it."""
        return subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=timeout)

    # -- partitions ----------------------------------------------------------------------

    def _services(self, services: str | Iterable[str]) -> list[str]:
        if isinstance(services, str):
            services = list(self.proxies) if services == "all" else [services]
        names = list(services)
        unknown = [s for s in names if s not in self.proxies]
        if unknown:
            raise HostSetupError(
                f"host {self.name}: no proxy for {unknown} (exposed: {sorted(self.proxies)})"
            )
        return names

    def _specs(self, service: str, kind: CutKind) -> list[list[str]]:
        port = str(self.proxies[service].port)
        out = ["OUTPUT", "-d", self.host_address, "-p", "tcp", "--dport", port]
        inbound = ["INPUT", "-s", self.host_address, "-p", "tcp", "--sport", port]
        if kind == "blackhole":
            return [[*out, "-j", "DROP"], [*inbound, "-j", "DROP"]]
        return [[*out, "-j", "REJECT", "--reject-with", "tcp-reset"]]

    def cut(self, services: str | Iterable[str] = "all", *, kind: CutKind = "blackhole") -> None:
        """Partition this host from ``services`` (a name, several, or ``"all"``); see the module doc.

        A service already cut is healed first, so the last cut's kind is the one in force.
        """
        if kind not in ("blackhole", "refuse"):
            raise ValueError(f"unknown cut kind {kind!r}")
        for service in self._services(services):
            self.heal(service)
            specs = self._specs(service, kind)
            for spec in specs:
                self.exec_checked("iptables", "-w", "-A", *spec)
            with self._mu:
                self._rules[service] = specs
                self.cuts.append(CutRecord(service, kind, time.monotonic()))
            if kind == "refuse":
                self.proxies[service].cut()  # open connections are reset (new ones: the rule)
            logger.info("host %s: cut from %s (%s)", self.name, service, kind)

    def heal(self, services: str | Iterable[str] = "all") -> None:
        """Remove the rules of ``services``: packets flow again."""
        for service in self._services(services):
            with self._mu:
                specs = self._rules.pop(service, [])
            if any("DROP" in spec for spec in specs):
                self._reset_given_up(service)
            for spec in specs:
                self.exec_checked("iptables", "-w", "-D", *spec)
            if specs:
                with self._mu:
                    for record in self.cuts:
                        if record.service == service and record.healed is None:
                            record.healed = time.monotonic()
                logger.info("host %s: healed from %s", self.name, service)

    def _reset_given_up(self, service: str) -> None:
        """Before a black hole heals: reset on the proxy the connections this host closed meanwhile.

        Their closing packets were dropped, so the proxy (and the service behind it) still hold
        them; TCP would reset them at the proxy's next retransmission, which backs off to many
        seconds. Only the connections still established inside the namespace carry on.
        """
        proxy = self.proxies[service]
        port = proxy.port
        listing = self.exec("ss", "-tnH", "state", "established", "dst", f"{self.host_address}:{port}")
        alive = {
            int(line.split()[-2].rsplit(":", 1)[1]) for line in listing.stdout.splitlines() if line.strip()
        }
        dead = {(client, upstream) for client, upstream in proxy.open_links() if client not in alive}
        with self._mu:
            ports = sorted(u for _, u in dead if u is not None)
            self.given_up.setdefault(service, set()).update(ports)
            self.given_up_log.extend((service, port) for port in ports)
        proxy.cut_clients({client for client, _ in dead})

    def is_cut(self, service: str) -> bool:
        with self._mu:
            return service in self._rules

    def cut_periods(self, service: str) -> list[tuple[float, float]]:
        """``(cut, healed)`` times of every partition from ``service`` (healed: +inf while in force)."""
        with self._mu:
            return [(r.at, r.healed or float("inf")) for r in self.cuts if r.service == service]

    def opened_upstream(self, service: str, port: int) -> bool:
        """Whether this host's proxy for ``service`` opened the upstream connection of local ``port``."""
        proxy = self.proxies.get(service)
        return proxy is not None and port in proxy.upstream_ports

    def exec_checked(self, *argv: str) -> str:
        done = self.exec(*argv)
        if done.returncode != 0:
            raise HostSetupError(f"host {self.name}: {' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    # -- end -------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill its processes, stop its proxies, delete its namespace (never raises)."""
        for child in self.processes:
            with contextlib.suppress(Exception):
                child.close()
        for proxy in list(self.proxies.values()):
            with contextlib.suppress(Exception):
                proxy.stop()
        _delete_namespace(self.namespace)
        with contextlib.suppress(Exception):
            _sh("ip", "link", "delete", self.veth, check=False)  # gone with the namespace already


@dataclass(frozen=True)
class StreamPeriod:
    """A span (``time.monotonic()``) in which one host's stream of a match could carry bytes."""

    sr_id: str
    host: str | None  # the test host's name (None: a client on loopback)
    start: float
    end: float


def most_concurrent(periods: Iterable[StreamPeriod]) -> dict[str, int]:
    """Per match, the most streams open at one instant (touching ends do not overlap)."""
    events: dict[str, list[tuple[float, int]]] = {}
    for p in periods:
        events.setdefault(p.sr_id, []).extend([(p.start, 1), (p.end, -1)])
    out = {}
    for sr_id, points in events.items():
        depth = best = 0
        for _, step in sorted(points, key=lambda e: (e[0], e[1])):  # a close before an open at one time
            depth += step
            best = max(best, depth)
        out[sr_id] = best
    return out


def _default_port(scheme: str) -> int:
    return {"postgresql": 5432, "postgres": 5432, "redis": 6379, "amqp": 5672, "http": 80}.get(scheme, 80)


class HostNetwork:
    """The test hosts of one test: ``add_host()`` each, ``close()`` (or ``with``) removes them all."""

    def __init__(self) -> None:
        reason = missing_requirements()
        if reason is not None:
            raise HostSetupError(reason)
        self.run_id = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.hosts: dict[str, TestHost] = {}
        self._closed = False
        for name in sweep_stale_namespaces():
            logger.warning("deleted namespace %s left by a crashed run", name)
        atexit.register(self.close)

    def add_host(self, name: str | None = None) -> TestHost:
        """A new host: its namespace, veth pair (a free /30) and loopback up inside."""
        name = name or f"h{len(self.hosts) + 1}"
        if name in self.hosts:
            raise HostSetupError(f"host {name} exists")
        namespace = f"{NAMESPACE_PREFIX}{self.run_id}-{name}"
        with _allocation_lock():
            used = _used_indexes()
            index = next((i for i in range(1, 255) if i not in used), None)
            if index is None:
                raise HostSetupError("no free /30 left in 10.213.0.0/16")
            host = TestHost(name=name, namespace=namespace, index=index, veth=f"kov{index}")
            self.hosts[name] = host
            try:
                self._make(host)
            except BaseException:
                host.close()
                del self.hosts[name]
                raise
        return host

    @staticmethod
    def _make(host: TestHost) -> None:
        peer = f"{host.veth}n"
        _sh("ip", "netns", "add", host.namespace)
        _sh("ip", "link", "add", host.veth, "type", "veth", "peer", "name", peer)
        _sh("ip", "link", "set", peer, "netns", host.namespace)
        _sh("ip", "addr", "add", f"{host.host_address}/30", "dev", host.veth)
        _sh("ip", "link", "set", host.veth, "up")
        ns = ("ip", "netns", "exec", host.namespace)
        _sh(*ns, "ip", "addr", "add", f"{host.address}/30", "dev", peer)
        _sh(*ns, "ip", "link", "set", peer, "up")
        _sh(*ns, "ip", "link", "set", "lo", "up")

    def __getitem__(self, name: str) -> TestHost:
        return self.hosts[name]

    def host_of(self, service: str, peer: tuple[str, int] | None) -> TestHost | None:
        """The host whose proxy for ``service`` is the client ``peer`` a service saw (None: not a host's)."""
        if peer is None:
            return None
        return next((h for h in self.hosts.values() if h.opened_upstream(service, peer[1])), None)

    def streaming_periods(self, records: Iterable[object], *, now: float | None = None) -> list[StreamPeriod]:
        """When each feed stream of ``records`` could carry bytes (``srsim.server.StreamRecord`` list).

        A stream streams from its open to its close, except while its host is cut from the feed
        (a black-holed connection stays open on the feed's side, but no byte reaches the host);
        after the heal it streams again unless the host gave it up meanwhile (``given_up``).
        """
        now = time.monotonic() if now is None else now
        periods = []
        for record in records:
            sr_id, peer = record.sr_id, record.peer  # type: ignore[attr-defined]
            start, end = record.opened, record.closed or now  # type: ignore[attr-defined]
            host = self.host_of("feed", peer)
            spans = [(start, end)]
            if host is not None:
                given_up = peer is not None and peer[1] in host.given_up.get("feed", set())
                for cut, healed in host.cut_periods("feed"):
                    after = float("inf") if given_up else healed
                    spans = [piece for a, b in spans for piece in ((a, min(b, cut)), (max(a, after), b))]
            for a, b in spans:
                if b > a:
                    periods.append(StreamPeriod(sr_id, host.name if host else None, a, b))
        return periods

    def close(self) -> None:
        """Remove every host (processes, proxies, namespaces); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for host in list(self.hosts.values()):
            host.close()
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    def __enter__(self) -> HostNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def _allocation_lock() -> Iterator[None]:
    """Hold the machine-wide lock under which a subnet index is picked and its address added."""
    with _LOCK_FILE.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
