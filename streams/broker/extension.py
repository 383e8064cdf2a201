"""The seam between the server and the coordinator (groups, producers, transactions, SASL).

The server owns sockets, framing, Produce/Fetch/Metadata/ListOffsets and topic
admin. Everything stateful about clients lives in an extension, loaded at start
from `streams.broker.coordinator.handlers` when that module exists:

- `HANDLERS: dict[int, Handler]` — extra API handlers by api key, merged into the
  server's registry (an extension may not replace a core API);
- `API_VERSIONS: dict[int, tuple[int, int]]` — the (min, max) versions to
  advertise for those keys (only what is implemented and tested);
- `create_extension(broker) -> BrokerExtension` (optional) — the hooks below;
  `broker` is the `streams.broker.context.BrokerContext` the extension keeps.

A `Handler` (`streams.broker.context`) is
`async def handle(ctx: RequestContext, request) -> response | None` where
`request` is kio's request entity of `ctx.api_version` and the response is
kio's response entity of the same version (`None` sends no response). Handlers
run on the broker's single asyncio loop; requests of one connection are handled
one at a time, in order (Kafka mutes a channel while its request is in flight).

Hooks are called synchronously on the loop thread with no `await` between the
produce check, the append and `on_appended`, so a check-then-append is atomic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from streams.broker.config import Listener
from streams.broker.security.acl import AclOperation, ResourceType
from streams.broker.security.authorizer import Authorizer

logger = logging.getLogger(__name__)

__all__ = ["ANONYMOUS", "BrokerExtension", "Connection", "Duplicate", "Reject"]


ANONYMOUS = "User:ANONYMOUS"
_PLAINTEXT = Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0)


@dataclass
class Connection:
    """Per-connection state: the peer, the listener it came in on, and its principal as
    Kafka names it (`User:alice` once SASL authenticated it, `User:<certificate subject>`
    for a client certificate on an SSL listener, else `User:ANONYMOUS`).

    A handler that sets `close_after_ms` has the connection closed that many milliseconds
    after its response is written, no further request read (as Kafka closes one whose SASL
    authentication failed, after `connection.failed.authentication.delay.ms`)."""

    peer: str
    principal: str = ANONYMOUS
    authenticated: bool = False
    listener: Listener = _PLAINTEXT
    attributes: dict[str, Any] = field(default_factory=dict)
    close_after_ms: int | None = None


@dataclass(frozen=True)
class Duplicate:
    """Produce check result: the batch was already appended at `base_offset`; ack it, append nothing."""

    base_offset: int
    log_append_time_ms: int = -1


@dataclass(frozen=True)
class Reject:
    """Produce check result: refuse the partition's records with `error_code` (e.g. 45, 47, 90)."""

    error_code: int
    message: str | None = None


class BrokerExtension:
    """No-op hooks; the coordinator subclasses this and overrides what it needs.

    `authorizer` is the ACL authorizer when the broker's `authorizer.class.name` switches it
    on (the coordinator sets it at start, over ACLs in its metadata log), else None: then
    every principal may do everything, as on Kafka without an authorizer."""

    authorizer: Authorizer | None = None

    async def start(self) -> None:
        """Called once after storage is loaded, before the socket accepts clients."""

    async def stop(self) -> None:
        """Called on shutdown before the logs are flushed and closed."""

    def requires_authentication(self, connection: Connection) -> bool:
        """True while `connection` must finish SASL before any API but ApiVersions/SASL:
        on a SASL_PLAINTEXT or SASL_SSL listener, until SASL authenticated it."""
        return connection.listener.sasl and not connection.authenticated

    def authorize(
        self,
        connection: Connection,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """Whether `connection`'s principal may do `operation` on the resource; a refusal of
        what a client asked for by name is logged (Kafka's authorizer audit log), one found
        by filtering a listing is not."""
        if self.authorizer is None:
            return True
        host = connection.peer.rpartition(":")[0]
        allowed = self.authorizer.authorize(
            connection.principal, host, operation, resource_type, name
        )
        if not allowed and log_denied:
            logger.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                connection.principal,
                operation.name,
                host,
                resource_type.name,
                name,
            )
        return allowed

    def authorize_any(
        self, connection: Connection, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether `connection`'s principal may do `operation` on some resource of the type."""
        if self.authorizer is None:
            return True
        host = connection.peer.rpartition(":")[0]
        return self.authorizer.authorize_any(connection.principal, host, operation, resource_type)

    def check_produce(
        self,
        topic: str,
        partition: int,
        records: memoryview,
        *,
        transactional_id: str | None,
        acks: int,
    ) -> Duplicate | Reject | None:
        """Before appending `records` (validated record batches): None to append."""
        return None

    def on_appended(
        self,
        topic: str,
        partition: int,
        records: memoryview,
        base_offset: int,
        last_offset: int,
    ) -> None:
        """After `records` were appended at [base_offset, last_offset]."""

    def last_stable_offset(self, topic: str, partition: int, high_watermark: int) -> int:
        """The offset read_committed consumers may read up to (exclusive)."""
        return high_watermark

    def aborted_transactions(
        self, topic: str, partition: int, fetch_offset: int, upper: int
    ) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [fetch_offset, upper)."""
        return []
