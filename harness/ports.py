"""The one way tests pick a TCP port (on 127.0.0.1 unless told another local address): ``free_port``."""

from __future__ import annotations

import random
import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A free port below the kernel's ephemeral range (32768 and up on Linux).

    A server a test starts, stops and binds again later (the fault proxy refusing, a private
    Redis restarted) keeps its port: a port the kernel picked (``bind(0)``) is an ephemeral one,
    which an outgoing connection may take meanwhile. Ports below that range are only ever taken
    on purpose. Also the port of "nothing listens here". ``host``: the local address to bind
    (a test host's veth address, harness/hosts.py).
    """
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port between 20000 and 32000")
