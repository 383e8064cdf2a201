"""The broker as request handlers, connections and the coordinator see it.

`BrokerContext` is the protocol `streams.broker.server.Broker` implements; code
that runs inside a broker (the handlers, `ClientConnection`, the coordinator)
types against it and never imports the server, so the server sits on top of
everything it wires together. `RequestContext` is what one request's handler
gets besides the request entity; `Handler` is the signature of a handler.

Concurrency contract: a `BrokerContext` is used from the broker's asyncio loop
thread only (see `streams.broker.server` for what runs in worker threads).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from streams.broker.config import BrokerConfig
from streams.broker.connection_quotas import ConnectionQuotas
from streams.broker.extension import BrokerExtension, Connection
from streams.broker.security.acl import AclOperation, ResourceType
from streams.broker.storage import LogManager
from streams.broker.waiting import AppendNotifier, GroupFlusher

__all__ = ["BrokerContext", "Handler", "RequestContext"]


class BrokerContext(Protocol):
    """A running broker's shared state and the few actions code inside it may take."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def logs(self) -> LogManager: ...

    @property
    def extension(self) -> BrokerExtension: ...

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """(min, max) version of every API the broker serves, core and extension ones."""
        ...

    @property
    def notifier(self) -> AppendNotifier:
        """Wakes long-polling fetches when a partition gets data."""
        ...

    @property
    def flusher(self) -> GroupFlusher:
        """One shared fsync for produces waiting on durability=sync."""
        ...

    @property
    def connection_quotas(self) -> ConnectionQuotas:
        """Open connections by client address, against `max.connections(.per.ip)`."""
        ...

    @property
    def port(self) -> int:
        """The port actually bound (the configured one may be 0)."""
        ...

    @property
    def listener_ports(self) -> Mapping[str, int]:
        """The port each listener is bound to, by listener name."""
        ...

    async def dispatch(self, conn: Connection, frame: bytes | memoryview) -> list[Any] | None:
        """Handle one request frame; the response as buffers, None for no answer."""
        ...

    def register_connection(self, task: asyncio.Task[None]) -> None:
        """Track a connection's request loop, so shutdown can end it."""
        ...

    def unregister_connection(self, task: asyncio.Task[None]) -> None:
        """Forget a connection's request loop once it has ended."""
        ...


@dataclass(frozen=True)
class RequestContext:
    """What a handler gets besides the request entity."""

    broker: BrokerContext
    connection: Connection
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    def authorized(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """Whether this request's principal may do `operation` on the resource (always,
        without an authorizer)."""
        return self.broker.extension.authorize(
            self.connection, operation, resource_type, name, log_denied=log_denied
        )

    def advertised(self) -> tuple[str, int]:
        """(host, port) a client is told this broker is at: the listener the request came
        in on, as Kafka answers Metadata and FindCoordinator per listener."""
        listener = self.connection.listener
        host = self.broker.config.advertised_host or listener.host
        return host, self.broker.listener_ports.get(listener.name, self.broker.port)


Handler = Callable[[RequestContext, Any], Awaitable[Any]]
