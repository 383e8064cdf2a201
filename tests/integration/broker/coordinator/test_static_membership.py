"""KIP-345 static membership against a real broker, as Apache Kafka 4.x answers it.

A consumer with `group.instance.id` that restarts inside its session timeout gets its
old partitions back and the other members see no rebalance; the member id of the
previous incarnation is fenced (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from confluent_kafka import Consumer
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import DescribeGroupsResponse
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.join_group.v7.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v7.response import JoinGroupResponse
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.leave_group.v5.response import LeaveGroupResponse
from kio.schema.offset_commit.v8 import request as commit_req
from kio.schema.offset_commit.v8.response import OffsetCommitResponse
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.sync_group.v5.response import SyncGroupResponse

from tests.support.broker_clients import FAST_GROUP, create_topic
from tests.support.broker_wire import Wire

pytestmark = [pytest.mark.kafka]

INSTANCE = "instance-a"


def _join(group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout=timedelta(seconds=30),
        rebalance_timeout=timedelta(seconds=5),
        member_id=member_id,
        group_instance_id=INSTANCE,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b"m"),),
    )


def _sync(group: str, member_id: str, generation: int, assignment: bytes | None = None):
    return SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=INSTANCE,
        protocol_type="consumer",
        protocol_name="range",
        assignments=()
        if assignment is None
        else (SyncGroupRequestAssignment(member_id=member_id, assignment=assignment),),
    )


def _describe(wire: Wire, group: str):
    (described,) = wire.call(
        DescribeGroupsRequest(groups=(group,), include_authorized_operations=False),
        DescribeGroupsResponse,
    ).groups
    return described


def test_static_member_rejoin_is_answered_from_the_stable_generation(broker, unique) -> None:
    """Kafka's updateStaticMemberAndRebalance in a Stable group: a JoinGroup with a known
    group.instance.id and no member id gets a new member id, the current generation and
    the old leader id (no assignor run); SyncGroup returns the stored assignment; the old
    member id is fenced in Heartbeat and OffsetCommit; LeaveGroup by instance id removes it."""
    topic, group = unique("static-wire"), unique("g-static")
    create_topic(broker.bootstrap, topic)
    with Wire(broker.bootstrap) as wire:
        first = wire.call(_join(group), JoinGroupResponse)
        assert first.error_code is ErrorCode.none  # no MEMBER_ID_REQUIRED round
        old, generation = first.member_id, first.generation_id
        assert first.leader == old
        synced = wire.call(_sync(group, old, generation, b"assignment-a"), SyncGroupResponse)
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"assignment-a")

        again = wire.call(_join(group), JoinGroupResponse)  # restarted, never left
        new = again.member_id
        assert again.error_code is ErrorCode.none and new != old
        assert (again.generation_id, again.leader, again.members) == (generation, old, ())
        synced = wire.call(_sync(group, new, generation), SyncGroupResponse)
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"assignment-a")

        beat = wire.call(
            HeartbeatRequest(
                group_id=group, generation_id=generation, member_id=old, group_instance_id=INSTANCE
            ),
            HeartbeatResponse,
        )
        assert beat.error_code is ErrorCode.fenced_instance_id
        errors = {}
        for member_id in (old, new):
            commit = wire.call(
                commit_req.OffsetCommitRequest(
                    group_id=group,
                    generation_id_or_member_epoch=generation,
                    member_id=member_id,
                    group_instance_id=INSTANCE,
                    topics=(
                        commit_req.OffsetCommitRequestTopic(
                            name=topic,
                            partitions=(
                                commit_req.OffsetCommitRequestPartition(
                                    partition_index=0,
                                    committed_offset=1,
                                    committed_leader_epoch=-1,
                                    committed_metadata=None,
                                ),
                            ),
                        ),
                    ),
                ),
                OffsetCommitResponse,
            )
            errors[member_id] = commit.topics[0].partitions[0].error_code
        assert errors == {old: ErrorCode.fenced_instance_id, new: ErrorCode.none}
        described = _describe(wire, group)
        assert described.group_state == "Stable"
        assert [(m.member_id, m.group_instance_id) for m in described.members] == [(new, INSTANCE)]

        left = wire.call(
            LeaveGroupRequest(
                group_id=group,
                members=(MemberIdentity(member_id=old, group_instance_id=INSTANCE, reason=None),),
            ),
            LeaveGroupResponse,
        )
        assert left.members[0].error_code is ErrorCode.fenced_instance_id
        left = wire.call(
            LeaveGroupRequest(
                group_id=group,
                members=(MemberIdentity(member_id="", group_instance_id=INSTANCE, reason=None),),
            ),
            LeaveGroupResponse,
        )
        assert left.members[0].error_code is ErrorCode.none
        assert _describe(wire, group).members == ()


def _consumer(bootstrap: str, topic: str, group: str, instance: str, events: list) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": instance,
            **FAST_GROUP,
            # long enough that a restart never races the session timeout
            "session.timeout.ms": 30_000,
            "partition.assignment.strategy": "range",
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda _c, ps: events.append(("assign", sorted(p.partition for p in ps))),
        on_revoke=lambda _c, ps: events.append(("revoke", sorted(p.partition for p in ps))),
    )
    return consumer


def _partitions(consumer: Consumer) -> list[int]:
    return sorted(p.partition for p in consumer.assignment())


def _poll_until(consumers: list[Consumer], done, rounds: int = 300) -> None:
    for _ in range(rounds):
        for consumer in consumers:
            consumer.poll(0.05)
        if done():
            return
    raise AssertionError("the consumers did not reach the expected assignment")


def test_restarted_static_consumer_gets_its_partitions_back_without_a_rebalance(
    broker, unique
) -> None:
    """Two librdkafka consumers with group.instance.id on four partitions; one closes
    (a static member's close sends no LeaveGroup) and starts again with the same
    instance id. As with Kafka, it gets the same partitions back and the other consumer
    sees neither a revocation nor an assignment."""
    topic, group = unique("static"), unique("g-static")
    create_topic(broker.bootstrap, topic, partitions=4)
    events_a: list = []
    events_b: list = []
    a = _consumer(broker.bootstrap, topic, group, "static-a", events_a)
    b = _consumer(broker.bootstrap, topic, group, "static-b", events_b)
    a2 = None
    try:
        _poll_until([a, b], lambda: len(_partitions(a)) == 2 and len(_partitions(b)) == 2)
        parts_a, parts_b = _partitions(a), _partitions(b)
        assert sorted(parts_a + parts_b) == [0, 1, 2, 3]
        seen_by_b = list(events_b)

        a.close()
        a = None
        events_a2: list = []
        a2 = _consumer(broker.bootstrap, topic, group, "static-a", events_a2)
        _poll_until([a2, b], lambda: bool(a2.assignment()))

        assert _partitions(a2) == parts_a
        assert events_a2 == [("assign", parts_a)]
        assert events_b == seen_by_b, "the other member was rebalanced"
        assert _partitions(b) == parts_b
        with Wire(broker.bootstrap) as wire:
            described = _describe(wire, group)
        assert described.group_state == "Stable"
        assert sorted(m.group_instance_id for m in described.members) == ["static-a", "static-b"]
    finally:
        for consumer in (a, a2, b):
            if consumer is not None:
                consumer.close()
