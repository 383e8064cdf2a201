"""Handlers of the classic group protocol: kio request in, kio response out.

FindCoordinator 0–3, JoinGroup 0–7, SyncGroup 0–5, Heartbeat 0–4,
LeaveGroup 0–5, OffsetCommit 2–8, OffsetFetch 1–7, ListGroups 0–5,
DescribeGroups 0–5, DeleteGroups 0–2. Each handler serves all its versions:
responses are built with ``make``, which drops fields a version lacks.
JoinGroup and SyncGroup may wait (a future completed by the group state
machine); the server handles one request per connection at a time, like
Kafka's muted channels, so a waiting join holds only its own connection.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.coordinator.coordinator import Coordinator
from streams.broker.coordinator.group import GroupState
from streams.broker.coordinator.groups import CommittedOffset, append_error_code
from streams.broker.coordinator.member import JoinResult, SyncResult
from streams.broker.errors import BrokerError
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

logger = logging.getLogger(__name__)

_ZERO = timedelta(0)
_MAX_METADATA = 4096


def _may(ctx: RequestContext, operation: AclOperation, group: str) -> bool:
    """Whether the request's principal may do `operation` on consumer group `group`."""
    return ctx.authorized(operation, ResourceType.GROUP, group)


def _coord(ctx: RequestContext) -> Coordinator:
    return ctx.broker.extension  # type: ignore[return-value]


def _ms(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _future_callback(fut: asyncio.Future[Any]) -> Any:
    def done(result: Any) -> None:
        if not fut.done():
            fut.set_result(result)

    return done


async def find_coordinator(ctx: RequestContext, request: Any) -> Any:
    module = response_module(10, ctx.api_version)
    broker = ctx.broker
    key_type = getattr(request, "key_type", 0)
    error = ErrorCode.none if key_type in (0, 1) else ErrorCode.invalid_request
    message = None if error is ErrorCode.none else f"unknown key type `{key_type}`"
    if key_type == 0 and not _may(ctx, AclOperation.DESCRIBE, request.key):
        error, message = ErrorCode.group_authorization_failed, "Group authorization failed."
    elif key_type == 1 and not ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.key
    ):
        error = ErrorCode.transactional_id_authorization_failed
        message = "Transactional Id authorization failed."
    host, port = ctx.advertised()
    return make(
        module.FindCoordinatorResponse,
        throttle_time=_ZERO,
        error_code=error,
        error_message=message,
        node_id=broker.config.node_id if error is ErrorCode.none else -1,
        host=host if error is ErrorCode.none else "",
        port=port if error is ErrorCode.none else -1,
    )


async def join_group(ctx: RequestContext, request: Any) -> Any:
    module = response_module(11, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None
    session_ms = _ms(request.session_timeout, 10_000)
    rebalance_ms = _ms(getattr(request, "rebalance_timeout", None), session_ms)
    if rebalance_ms < 0:
        rebalance_ms = session_ms

    def respond(result: JoinResult) -> Any:
        return make(
            module.JoinGroupResponse,
            throttle_time=_ZERO,
            error_code=result.error,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name
            if ctx.api_version >= 7
            else (result.protocol_name or ""),
            leader=result.leader,
            member_id=result.member_id,
            members=tuple(
                make(module.JoinGroupResponseMember, member_id=m, group_instance_id=i, metadata=md)
                for m, i, md in result.members
            ),
        )

    if not _may(ctx, AclOperation.READ, request.group_id):
        return respond(JoinResult(ErrorCode.group_authorization_failed, request.member_id))
    if not request.group_id:
        return respond(JoinResult(ErrorCode.invalid_group_id, request.member_id))
    error = coord.groups.validate_session_timeout(session_ms)
    if error is not ErrorCode.none:
        return respond(JoinResult(error, request.member_id))
    fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
    coord.groups.get_or_create(request.group_id).join(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "",
        client_host=ctx.connection.peer.rsplit(":", 1)[0],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=ctx.api_version >= 4,
        now_ms=coord.now_ms(),
        callback=_future_callback(fut),
    )
    return respond(await fut)


async def sync_group(ctx: RequestContext, request: Any) -> Any:
    module = response_module(14, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None

    def respond(result: SyncResult) -> Any:
        return make(
            module.SyncGroupResponse,
            throttle_time=_ZERO,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    if not _may(ctx, AclOperation.READ, request.group_id):
        return respond(SyncResult(ErrorCode.group_authorization_failed))
    group = coord.groups.groups.get(request.group_id)
    if group is None:
        return respond(SyncResult(ErrorCode.unknown_member_id))
    fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
    group.sync(
        member_id=request.member_id,
        generation_id=request.generation_id,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
        now_ms=coord.now_ms(),
        callback=_future_callback(fut),
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    return respond(await fut)


async def heartbeat(ctx: RequestContext, request: Any) -> Any:
    module = response_module(12, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None
    group = coord.groups.groups.get(request.group_id)
    if not _may(ctx, AclOperation.READ, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif group is None:
        error = ErrorCode.unknown_member_id
    else:
        error = group.heartbeat(
            member_id=request.member_id,
            generation_id=request.generation_id,
            now_ms=coord.now_ms(),
            group_instance_id=getattr(request, "group_instance_id", None),
        )
    return make(module.HeartbeatResponse, throttle_time=_ZERO, error_code=error)


async def leave_group(ctx: RequestContext, request: Any) -> Any:
    module = response_module(13, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None
    group = coord.groups.groups.get(request.group_id)
    now = coord.now_ms()
    if not _may(ctx, AclOperation.READ, request.group_id):
        return make(
            module.LeaveGroupResponse,
            throttle_time=_ZERO,
            error_code=ErrorCode.group_authorization_failed,
            members=(),
        )
    if ctx.api_version < 3:
        error = (
            ErrorCode.unknown_member_id if group is None else group.leave(request.member_id, now)
        )
        return make(module.LeaveGroupResponse, throttle_time=_ZERO, error_code=error)
    results = []
    for identity in request.members:
        error = (
            ErrorCode.unknown_member_id
            if group is None
            else group.leave(identity.member_id, now, identity.group_instance_id)
        )
        results.append(
            make(
                module.MemberResponse,
                member_id=identity.member_id,
                group_instance_id=identity.group_instance_id,
                error_code=error,
            )
        )
    return make(
        module.LeaveGroupResponse,
        throttle_time=_ZERO,
        error_code=ErrorCode.none,
        members=tuple(results),
    )


async def offset_commit(ctx: RequestContext, request: Any) -> Any:
    module = response_module(8, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None
    now = coord.now_ms()
    error = coord.groups.validate_commit(
        request.group_id,
        request.member_id,
        request.generation_id_or_member_epoch,
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    if error is ErrorCode.none and not request.group_id:
        error = ErrorCode.invalid_group_id
    group_denied = not _may(ctx, AclOperation.READ, request.group_id)
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    errors: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
    for topic in request.topics:
        parts: list[tuple[int, ErrorCode]] = []
        count = catalog.partition_count(ctx.broker, topic.name) or 0
        topic_denied = group_denied or not ctx.authorized(
            AclOperation.READ, ResourceType.TOPIC, topic.name
        )
        for p in topic.partitions:
            # as Kafka's KafkaApis: the group's READ, then the topic's, then a partition
            # that does not exist is refused before the group is asked; the others of the
            # request are still committed
            if topic_denied:
                denied = ErrorCode.group_authorization_failed
                if not group_denied:
                    denied = ErrorCode.topic_authorization_failed
                parts.append((p.partition_index, denied))
                continue
            perr = error if 0 <= p.partition_index < count else ErrorCode.unknown_topic_or_partition
            if (
                perr is ErrorCode.none
                and p.committed_metadata is not None
                and len(p.committed_metadata) > _MAX_METADATA
            ):
                perr = ErrorCode.offset_metadata_too_large
            if perr is ErrorCode.none:
                offsets[(topic.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                    now,
                )
            parts.append((p.partition_index, perr))
        errors.append((topic.name, parts))
    if offsets:
        try:
            coord.groups.commit_offsets(request.group_id, offsets, now_ms=now)
        except BrokerError as e:  # nothing was committed: every partition gets the error
            failed = append_error_code(e)
            errors = [
                (name, [(i, failed if (name, i) in offsets else perr) for i, perr in parts])
                for name, parts in errors
            ]
    topics = [
        make(
            module.OffsetCommitResponseTopic,
            name=name,
            partitions=tuple(
                make(module.OffsetCommitResponsePartition, partition_index=i, error_code=perr)
                for i, perr in parts
            ),
        )
        for name, parts in errors
    ]
    if error is not ErrorCode.none:
        logger.info(
            "group %s: offset commit by %s (generation %d) refused: %s",
            request.group_id,
            request.member_id,
            request.generation_id_or_member_epoch,
            error.name,
        )
    return make(module.OffsetCommitResponse, throttle_time=_ZERO, topics=tuple(topics))


def _describable_topics(ctx: RequestContext, wanted: list[tuple[str, int]] | None) -> set[str]:
    """The topics of an OffsetFetch the principal may describe (Kafka answers the others
    TOPIC_AUTHORIZATION_FAILED when named, and leaves them out of an all-topics fetch)."""
    names = {t for t, _ in wanted} if wanted is not None else set(catalog.topic_names(ctx.broker))
    return {
        t
        for t in names
        if ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.TOPIC, t, log_denied=wanted is not None
        )
    }


def _offset_fetch_refused(module: Any, wanted: list[tuple[str, int]] | None) -> Any:
    """GROUP_AUTHORIZATION_FAILED: the response's error (v2+), and each partition's (v1)."""
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in wanted or ():
        by_topic.setdefault(topic, []).append(
            make(
                module.OffsetFetchResponsePartition,
                partition_index=partition,
                committed_offset=-1,
                committed_leader_epoch=-1,
                metadata="",
                error_code=ErrorCode.group_authorization_failed,
            )
        )
    topics = tuple(
        make(module.OffsetFetchResponseTopic, name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return make(
        module.OffsetFetchResponse,
        throttle_time=_ZERO,
        topics=topics,
        error_code=ErrorCode.group_authorization_failed,
    )


async def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    module = response_module(9, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    if not _may(ctx, AclOperation.DESCRIBE, request.group_id):
        return _offset_fetch_refused(module, wanted)
    described = _describable_topics(ctx, wanted)
    found = coord.groups.fetch_offsets(request.group_id, wanted)
    if wanted is None:  # every committed offset: of the topics the principal may describe
        found = {tp: o for tp, o in found.items() if tp[0] in described}
    # KIP-447: a read_committed consumer must not start from an offset a pending
    # transaction is about to replace; it retries on UNSTABLE_OFFSET_COMMIT.
    unstable = (
        coord.txns.pending_offsets(request.group_id)
        if getattr(request, "require_stable", False) and coord.txns is not None
        else set()
    )
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in wanted if wanted is not None else sorted(found):
        committed = found.get((topic, partition))
        by_topic.setdefault(topic, []).append(
            make(
                module.OffsetFetchResponsePartition,
                partition_index=partition,
                committed_offset=committed.offset if committed else -1,
                committed_leader_epoch=committed.leader_epoch if committed else -1,
                metadata=(committed.metadata if committed else "") or "",
                error_code=ErrorCode.topic_authorization_failed
                if topic not in described
                else ErrorCode.unstable_offset_commit
                if (topic, partition) in unstable
                else ErrorCode.none,
            )
        )
    topics = tuple(
        make(module.OffsetFetchResponseTopic, name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return make(
        module.OffsetFetchResponse, throttle_time=_ZERO, topics=topics, error_code=ErrorCode.none
    )


def _listable(ctx: RequestContext, group_id: str) -> bool:
    return ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id, log_denied=False)


async def list_groups(ctx: RequestContext, request: Any) -> Any:
    module = response_module(16, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None
    states = set(getattr(request, "states_filter", None) or ())
    # every group here is a classic one; Kafka parses type names case-insensitively
    types = {t.lower() for t in getattr(request, "types_filter", None) or ()}
    # DESCRIBE on the cluster lists every group; else the groups the principal may describe
    everything = ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    )
    groups = tuple(
        make(
            module.ListedGroup,
            group_id=group_id,
            protocol_type=protocol_type,
            group_state=state,
            group_type="classic",
        )
        for group_id, protocol_type, state in coord.groups.list_groups(states)
        if (not types or "classic" in types) and (everything or _listable(ctx, group_id))
    )
    return make(
        module.ListGroupsResponse, throttle_time=_ZERO, error_code=ErrorCode.none, groups=groups
    )


async def describe_groups(ctx: RequestContext, request: Any) -> Any:
    module = response_module(15, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None
    described = []
    for group_id in request.groups:
        group = coord.groups.groups.get(group_id)
        denied = not _may(ctx, AclOperation.DESCRIBE, group_id)
        if group is None or denied:
            described.append(
                make(
                    module.DescribedGroup,
                    error_code=ErrorCode.group_authorization_failed if denied else ErrorCode.none,
                    group_id=group_id,
                    group_state="" if denied else GroupState.DEAD.value,
                    protocol_type="",
                    protocol_data="",
                    members=(),
                )
            )
            continue
        stable = group.state is GroupState.STABLE
        members = tuple(
            make(
                module.DescribedGroupMember,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata_for(group.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        described.append(
            make(
                module.DescribedGroup,
                error_code=ErrorCode.none,
                group_id=group_id,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=members,
            )
        )
    return make(module.DescribeGroupsResponse, throttle_time=_ZERO, groups=tuple(described))


async def delete_groups(ctx: RequestContext, request: Any) -> Any:
    module = response_module(42, ctx.api_version)
    coord = _coord(ctx)
    assert coord.groups is not None
    results = tuple(
        make(
            module.DeletableGroupResult,
            group_id=g,
            error_code=coord.groups.delete_group(g)
            if _may(ctx, AclOperation.DELETE, g)
            else ErrorCode.group_authorization_failed,
        )
        for g in request.groups_names
    )
    return make(module.DeleteGroupsResponse, throttle_time=_ZERO, results=results)


APIS = [
    (10, (0, 3), find_coordinator),
    (11, (0, 7), join_group),
    (14, (0, 5), sync_group),
    (12, (0, 4), heartbeat),
    (13, (0, 5), leave_group),
    (8, (2, 8), offset_commit),
    (9, (1, 7), offset_fetch),
    (16, (0, 5), list_groups),
    (15, (0, 5), describe_groups),
    (42, (0, 2), delete_groups),
]
