"""How many connections the broker holds, per client address and in all (Kafka's
`ConnectionQuotas`).

`max.connections.per.ip` (default 2147483647) caps the connections from one address,
`max.connections.per.ip.overrides` (`host:count,...`) gives named hosts or addresses
their own cap, and `max.connections` (default 2147483647) caps them all. A connection
over a cap is closed as soon as it is accepted, with a log line naming the address and
the cap, as Kafka rejects one over its per-address cap (Kafka's acceptor instead waits
for a free slot under `max.connections`; here the connection is closed, so a flood does
not pile up open sockets while waiting).

Concurrency contract: used from the broker's asyncio loop thread only.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping

__all__ = ["ConnectionQuotas"]

logger = logging.getLogger(__name__)


def _addresses(host: str) -> set[str]:
    """The IP addresses `host` names (itself when it is one), as Kafka's
    `InetAddress.getByName` resolves an override's host."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        logger.warning(
            "max.connections.per.ip.overrides: host `%s` does not resolve; its override "
            "applies to no connection",
            host,
        )
        return set()
    return {str(info[4][0]) for info in infos}


class ConnectionQuotas:
    """Counts of open connections by client address; `acquire` before serving one,
    `release` once it has ended."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_connections_per_ip: int,
        overrides: Mapping[str, int] | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self._overrides: dict[str, int] = {}
        for host, count in (overrides or {}).items():
            for address in _addresses(host):
                self._overrides[address] = count
        self._counts: dict[str, int] = {}
        self.total = 0

    def limit_for(self, address: str) -> int:
        return self._overrides.get(address, self.max_connections_per_ip)

    def acquire(self, address: str) -> str | None:
        """Count a new connection from `address`; None when it may be served, else why
        not (it is then not counted)."""
        if self.total >= self.max_connections:
            return (
                f"the broker already has the configured maximum of {self.max_connections} "
                "connections (max.connections)"
            )
        count = self._counts.get(address, 0)
        limit = self.limit_for(address)
        if count >= limit:
            return (
                f"address {address} already has the configured maximum of {limit} "
                "connections (max.connections.per.ip)"
            )
        self._counts[address] = count + 1
        self.total += 1
        return None

    def release(self, address: str) -> None:
        count = self._counts.get(address, 0)
        if count <= 1:
            self._counts.pop(address, None)
        else:
            self._counts[address] = count - 1
        self.total = max(0, self.total - 1)
