"""The coordinator's API handlers, advertised versions and extension factory.

The server (``streams.broker.server``) imports this module at start and merges
``HANDLERS`` and ``API_VERSIONS`` into its registry, then installs the hooks of
``create_extension(broker)`` (see ``streams.broker.extension``). Only versions
implemented and tested with librdkafka and kafka-python are listed. Of the KIP-848
consumer group protocol only ConsumerGroupHeartbeat is offered, and it answers
UNSUPPORTED_VERSION as a Kafka offering only the classic protocol does
(``consumer_group_apis``); OffsetCommit and OffsetFetch stop below v9, the first
versions for groups of that protocol.
"""

from __future__ import annotations

from typing import Any

from streams.broker.context import BrokerContext, Handler, RequestContext
from streams.broker.coordinator import (
    consumer_group_apis,
    group_apis,
    offset_apis,
    sasl,
    scram_apis,
    txn_admin_apis,
    txn_apis,
)
from streams.broker.coordinator.coordinator import Coordinator

__all__ = ["API_VERSIONS", "HANDLERS", "create_extension"]


def _waking(handler: Handler) -> Handler:
    """`handler`, first telling the coordinator a request came (`Coordinator.touched`):
    an idle coordinator ticks once a second, a busy one every ``coordinator.tick.ms``."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        ctx.broker.extension.touched()  # type: ignore[attr-defined]
        return await handler(ctx, request)

    return handle


HANDLERS: dict[int, Handler] = {}
API_VERSIONS: dict[int, tuple[int, int]] = {}
for _key, _versions, _handler in (
    *group_apis.APIS,
    *consumer_group_apis.APIS,
    *offset_apis.APIS,
    *txn_apis.APIS,
    *txn_admin_apis.APIS,
    *sasl.APIS,
    *scram_apis.APIS,
):
    HANDLERS[_key] = _waking(_handler)
    API_VERSIONS[_key] = _versions


def create_extension(broker: BrokerContext) -> Coordinator:
    """The hooks object the server calls (produce checks, LSO, SASL gate)."""
    return Coordinator(broker)
