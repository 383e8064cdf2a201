"""Ports for the servers tests start that take their port as an argument (Apache Kafka,
PostgreSQL, Kafka Connect, Spark Connect, S3Proxy).

A port found by binding port 0 comes from the kernel's ephemeral range, from which it also
hands out the local port of every outgoing connection: between the pick and the server's
own bind, one of the suite's clients (four test processes run side by side) can take it,
and the server fails with "Address already in use" (seen in CI: an Apache Kafka node).
Ports below that range are never handed out on their own, so a port picked there and
bindable now stays free until a server of ours binds it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10000
"""The lowest port picked: above the well-known and registered services a machine runs."""
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _below_ephemeral() -> int:
    try:
        return int(EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default range starts here


def free_ports(count: int) -> list[int]:
    """`count` distinct ports on 127.0.0.1, bindable now, below the ephemeral range."""
    top = _below_ephemeral()
    picked: list[int] = []
    for _ in range(200 * count):
        port = random.randint(LOWEST, top - 1)
        if port in picked:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken: a server of another test, or of the machine
        picked.append(port)
        if len(picked) == count:
            return picked
    raise OSError(f"no {count} free port(s) between {LOWEST} and {top - 1} on 127.0.0.1")


def free_port() -> int:
    """One port as `free_ports` picks them."""
    return free_ports(1)[0]
