"""OffsetDelete (47) v0: forget a group's committed offsets, as Kafka's coordinator does.

Kafka's rules for a classic group: an unknown group is GROUP_ID_NOT_FOUND; a
group with members whose protocol type is not `consumer` is NON_EMPTY_GROUP; a
consumer group with members refuses, per partition, the topics its members are
subscribed to (GROUP_SUBSCRIBED_TO_TOPIC) and deletes the others; an Empty group
deletes everything asked. Partitions without a committed offset are no error.
"""

from __future__ import annotations

import logging
import struct
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.coordinator.coordinator import Coordinator
from streams.broker.coordinator.group import Group, GroupState
from streams.broker.coordinator.groups import append_error_code
from streams.broker.errors import BrokerError
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import AclOperation, ResourceType

logger = logging.getLogger(__name__)

OFFSET_DELETE = 47
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (any version: the topic array comes
    first, after the int16 version); empty when the bytes do not parse."""
    try:
        pos = _I16.size
        (count,) = _I32.unpack_from(metadata, pos)
        pos += _I32.size
        topics = set()
        for _ in range(max(count, 0)):
            (length,) = _I16.unpack_from(metadata, pos)
            pos += _I16.size
            topics.add(metadata[pos : pos + length].decode())
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


def _group_error(group: Group | None, has_offsets: bool) -> ErrorCode:
    if group is None or group.state is GroupState.DEAD:
        return ErrorCode.none if has_offsets else ErrorCode.group_id_not_found
    if group.members and group.protocol_type != "consumer":
        return ErrorCode.non_empty_group
    return ErrorCode.none


def _subscriptions(group: Group | None) -> set[str]:
    if group is None or group.state is GroupState.EMPTY or not group.members:
        return set()
    topics: set[str] = set()
    for member in group.members.values():
        topics |= _subscribed_topics(member.metadata_for(group.protocol_name))
    return topics


async def offset_delete(ctx: RequestContext, request: Any) -> Any:
    module = response_module(OFFSET_DELETE, ctx.api_version)
    coord: Coordinator = ctx.broker.extension  # type: ignore[assignment]
    assert coord.groups is not None
    group = coord.groups.groups.get(request.group_id)
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error = _group_error(group, request.group_id in coord.groups.offsets)
    if error is not ErrorCode.none:
        return make(
            module.OffsetDeleteResponse, error_code=error, throttle_time=timedelta(0), topics=()
        )
    subscribed = _subscriptions(group)
    deletable: list[tuple[str, int]] = []
    topics = []
    for topic in request.topics:
        readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic.name)
        refused = topic.name in subscribed or not readable
        if not refused:
            deletable += [(topic.name, p.partition_index) for p in topic.partitions]
        topics.append(
            make(
                module.OffsetDeleteResponseTopic,
                name=topic.name,
                partitions=tuple(
                    make(
                        module.OffsetDeleteResponsePartition,
                        partition_index=p.partition_index,
                        error_code=ErrorCode.topic_authorization_failed
                        if not readable
                        else ErrorCode.group_subscribed_to_topic
                        if refused
                        else ErrorCode.none,
                    )
                    for p in topic.partitions
                ),
            )
        )
    coord.groups.set_now(coord.now_ms())
    try:
        coord.groups.delete_offsets(request.group_id, deletable)
    except BrokerError as e:  # nothing was deleted
        return make(
            module.OffsetDeleteResponse,
            error_code=append_error_code(e),
            throttle_time=timedelta(0),
            topics=(),
        )
    return make(
        module.OffsetDeleteResponse,
        error_code=ErrorCode.none,
        throttle_time=timedelta(0),
        topics=tuple(topics),
    )


APIS = [(OFFSET_DELETE, (0, 0), offset_delete)]
