"""The test-host harness itself (harness/hosts.py): reach, black hole, refusal, heal and cleanup."""

from __future__ import annotations

import os
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.hosts import HostNetwork, TestHost, namespaces
from tests.waiting import wait_for

pytestmark = pytest.mark.partition

#: Run inside a host: connect to argv[1]:argv[2], send and read one line; print what happened.
PROBE = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as s:
        s.sendall(b"ping")
        print("echo" if s.recv(16) == b"ping" else "other")
except TimeoutError:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except ConnectionResetError:
    print("reset")
except OSError as exc:
    print("error", exc)
"""

#: Run inside a host: one connection, an echo, then (once argv[3] exists) another echo on it.
HOLD = """
import os, socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
s.sendall(b"ping"); assert s.recv(16) == b"ping"
print("open", flush=True)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
try:
    s.sendall(b"ping")
    print("echo" if s.recv(16) == b"ping" else "other", flush=True)
except TimeoutError:
    print("timeout", flush=True)
except ConnectionResetError:
    print("reset", flush=True)
"""


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(4096):
                self.request.sendall(data)
        except OSError:
            pass


@pytest.fixture
def echo() -> Iterator[int]:
    """An echo server on 127.0.0.1 (the "service"); its port."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _probe(host: TestHost, address: str, port: int) -> str:
    return host.exec(sys.executable, "-c", PROBE, address, str(port)).stdout.strip()


def _exposed(host: TestHost, port: int) -> tuple[str, int]:
    url = host.expose("redis", f"redis://127.0.0.1:{port}/0")
    return host.host_address, int(url.rsplit(":", 1)[1].split("/")[0])


def test_a_host_reaches_a_service_only_through_its_proxy(host_network: HostNetwork, echo: int) -> None:
    host = host_network.add_host()
    address, port = _exposed(host, echo)
    assert _probe(host, address, port) == "echo"
    assert _probe(host, "127.0.0.1", echo) == "refused"  # the namespace's own loopback
    assert host.env({"REDIS_URL": f"redis://127.0.0.1:{echo}/0", "APP_ENV": "x"}) == {
        "REDIS_URL": f"redis://{address}:{port}/0",
        "APP_ENV": "x",
    }


def test_a_black_hole_times_out_a_refusal_refuses_and_heal_restores(
    host_network: HostNetwork, echo: int, tmp_path: Path
) -> None:
    host = host_network.add_host()
    other = host_network.add_host()
    address, port = _exposed(host, echo)
    other_address, other_port = _exposed(other, echo)
    go = tmp_path / "go"
    held = host.run(
        [sys.executable, "-c", HOLD, address, str(port), str(go)], env={}, log=tmp_path / "hold.log"
    )
    wait_for(lambda: "open" in held.output() or not held.running(), timeout=20, what="the held connection")
    host.cut("redis", kind="blackhole")
    assert _probe(host, address, port) == "timeout"  # the SYN is dropped
    assert _probe(other, other_address, other_port) == "echo"  # only this host is cut
    go.touch()
    held.proc.wait(timeout=20)
    assert held.output().split() == ["open", "timeout"]  # the open connection stayed, silent
    assert host.proxies["redis"].connections == 1  # never closed on the proxy's side
    host.cut("redis", kind="refuse")
    assert _probe(host, address, port) in ("refused", "reset")
    assert host.proxies["redis"].connections == 0  # the open one was reset
    host.heal()
    assert _probe(host, address, port) == "echo"
    assert host.exec("iptables", "-S").stdout.count("-j") == 0  # no rule left


#: Run inside a host: two connections; once argv[3] exists, close the first and echo on the second
#: once argv[4] exists.
TWO = """
import os, socket, sys, time
def wait(path):
    while not os.path.exists(path):
        time.sleep(0.05)
a, b = (socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) for _ in range(2))
print("open", flush=True)
wait(sys.argv[3])
a.close()
print("closed", flush=True)
wait(sys.argv[4])
b.sendall(b"ping")
print("echo" if b.recv(16) == b"ping" else "other", flush=True)
"""


def test_a_heal_resets_the_connections_the_host_gave_up_and_keeps_the_others(
    host_network: HostNetwork, echo: int, tmp_path: Path
) -> None:
    host = host_network.add_host()
    address, port = _exposed(host, echo)
    close, send = tmp_path / "close", tmp_path / "send"
    argv = [sys.executable, "-c", TWO, address, str(port), str(close), str(send)]
    client = host.run(argv, env={}, log=tmp_path / "two.log")
    wait_for(lambda: "open" in client.output() or not client.running(), timeout=20, what="two connections")
    wait_for(lambda: host.proxies["redis"].connections == 2, timeout=10, what="both on the proxy")
    host.cut("redis", kind="blackhole")
    close.touch()
    wait_for(lambda: "closed" in client.output(), timeout=10, what="the first closed")
    assert host.proxies["redis"].connections == 2  # its FIN was dropped: the proxy still holds it
    host.heal("redis")
    assert host.proxies["redis"].connections == 1  # reset at the heal, not at a retransmission
    assert len(host.given_up["redis"]) == 1
    assert host.given_up_log == [("redis", *host.given_up["redis"])]
    send.touch()
    client.proc.wait(timeout=20)
    assert client.output().split() == ["open", "closed", "echo"]  # the other one carried on


def test_closing_the_network_leaves_no_namespace_veth_or_process(echo: int, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("test hosts need root (network namespaces, veth pairs, iptables)")
    network = HostNetwork()
    try:
        host = network.add_host()
        _exposed(host, echo)
        sleeper = host.run(
            [sys.executable, "-c", "import time; time.sleep(600)"], env={}, log=tmp_path / "s.log"
        )
        names = {h.namespace for h in network.hosts.values()}
        assert names <= set(namespaces())
    finally:
        network.close()
    assert not names & set(namespaces())
    assert not sleeper.running()
    assert host.exec("true").returncode != 0  # the namespace is gone
    assert not (Path("/sys/class/net") / host.veth).exists()
    addresses = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    assert f"inet {host.host_address}/" not in addresses
