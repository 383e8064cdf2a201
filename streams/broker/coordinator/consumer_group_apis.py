"""ConsumerGroupHeartbeat (key 68, v0–v1), the KIP-848 consumer group protocol's entry.

The coordinator offers only the classic group protocol, and answers this API as an
Apache Kafka whose coordinator does (`group.coordinator.rebalance.protocols=classic`):
the API is advertised, and every heartbeat gets UNSUPPORTED_VERSION with no message,
member or assignment, before the request is looked at. Advertising it matters to the
clients: librdkafka with `group.protocol=consumer` waits without an error for a broker
that lacks the API, and raises a fatal error on this answer; the Java client raises
`UnsupportedVersionException` on both.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.protocol import make, response_module

CONSUMER_GROUP_HEARTBEAT = 68


async def consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    module = response_module(CONSUMER_GROUP_HEARTBEAT, ctx.api_version)
    return make(
        module.ConsumerGroupHeartbeatResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode.unsupported_version,
        error_message=None,
        member_id=None,
        member_epoch=0,
        heartbeat_interval=timedelta(0),
        assignment=None,
    )


APIS = [(CONSUMER_GROUP_HEARTBEAT, (0, 1), consumer_group_heartbeat)]
