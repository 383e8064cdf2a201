"""Group coordinator answers matched to Apache Kafka 4.x, over the wire and a real client.

Each test pins a case where the bundled broker used to answer differently from
Kafka; Kafka's behaviour is named in the docstring.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.offset_commit.v8 import request as commit_req
from kio.schema.offset_commit.v8.response import OffsetCommitResponse
from kio.schema.offset_fetch.v7 import request as fetch_req
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse

from tests.support.broker_clients import create_topic
from tests.support.broker_wire import Wire

pytestmark = [pytest.mark.kafka]


def _commit(group: str, offsets: dict[str, list[tuple[int, int, int]]]):
    """A standalone commit (no generation): topic -> [(partition, offset, leader epoch)]."""
    return commit_req.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=tuple(
            commit_req.OffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    commit_req.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=e,
                        committed_metadata="m",
                    )
                    for p, o, e in parts
                ),
            )
            for topic, parts in offsets.items()
        ),
    )


def _fetch(group: str, topic: str, partitions: list[int]):
    return fetch_req.OffsetFetchRequest(
        group_id=group,
        topics=(
            fetch_req.OffsetFetchRequestTopic(name=topic, partition_indexes=tuple(partitions)),
        ),
    )


def _errors(response: OffsetCommitResponse) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def test_offset_commit_refuses_unknown_topics_and_partitions(broker, unique) -> None:
    """Kafka's KafkaApis.handleOffsetCommitRequest: UNKNOWN_TOPIC_OR_PARTITION for a
    topic or partition that does not exist; the request's other partitions commit."""
    topic, missing, group = unique("commit-known"), unique("commit-missing"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    with Wire(broker.bootstrap) as wire:
        response = wire.call(
            _commit(group, {topic: [(0, 5, -1), (9, 5, -1)], missing: [(0, 3, -1)]}),
            OffsetCommitResponse,
        )
        assert _errors(response) == {
            (topic, 0): ErrorCode.none,
            (topic, 9): ErrorCode.unknown_topic_or_partition,
            (missing, 0): ErrorCode.unknown_topic_or_partition,
        }
        fetched = wire.call(_fetch(group, missing, [0]), OffsetFetchResponse)
        assert fetched.topics[0].partitions[0].committed_offset == -1
        fetched = wire.call(_fetch(group, topic, [0]), OffsetFetchResponse)
        assert fetched.topics[0].partitions[0].committed_offset == 5


def test_offset_fetch_returns_the_committed_leader_epoch(broker, unique) -> None:
    """Kafka stores OffsetCommit's committed_leader_epoch and OffsetFetch returns it."""
    topic, group = unique("commit-epoch"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    with Wire(broker.bootstrap) as wire:
        response = wire.call(_commit(group, {topic: [(0, 4, 7), (1, 2, -1)]}), OffsetCommitResponse)
        assert set(_errors(response).values()) == {ErrorCode.none}
        fetched = wire.call(_fetch(group, topic, [0, 1]), OffsetFetchResponse)
    parts = {p.partition_index: p for p in fetched.topics[0].partitions}
    assert (parts[0].committed_offset, parts[0].committed_leader_epoch) == (4, 7)
    assert (parts[1].committed_offset, parts[1].committed_leader_epoch) == (2, -1)


def test_librdkafka_reads_back_the_leader_epoch_it_committed(broker, unique) -> None:
    topic, group = unique("rdk-epoch"), unique("g")
    create_topic(broker.bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 3, leader_epoch=2)], asynchronous=False)
        (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        consumer.close()
    assert (committed.offset, committed.leader_epoch) == (3, 2)


def test_list_groups_filters_compare_case_insensitively(broker, unique) -> None:
    """Kafka's GroupMetadataManager.listGroups lower-cases the state filter and parses
    type names case-insensitively; a classic group is of type `classic`, not `consumer`."""
    topic, group = unique("list-types"), unique("g")
    create_topic(broker.bootstrap, topic)
    with Wire(broker.bootstrap) as wire:
        wire.call(_commit(group, {topic: [(0, 1, -1)]}), OffsetCommitResponse)  # an Empty group

        def listed(states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> set[str]:
            request = ListGroupsRequest(states_filter=states, types_filter=types)
            response = wire.call(request, ListGroupsResponse)
            assert response.error_code == ErrorCode.none
            return {g.group_id for g in response.groups}

        for types in (("classic",), ("Classic",), ("CLASSIC",), ("consumer", "Classic")):
            assert group in listed(types=types), types
        assert group not in listed(types=("CONSUMER",))
        assert group not in listed(types=("share",))
        for states in (("Empty",), ("empty",), ("EMPTY",)):
            assert group in listed(states=states), states
        assert group not in listed(states=("stable",))
        assert group in listed(states=("empty",), types=("classic",))


def _offset_delete(group: str, topics: dict[str, list[int]]):
    from kio.schema.offset_delete.v0 import request as delete_req

    return delete_req.OffsetDeleteRequest(
        group_id=group,
        topics=tuple(
            delete_req.OffsetDeleteRequestTopic(
                name=t,
                partitions=tuple(
                    delete_req.OffsetDeleteRequestPartition(partition_index=p) for p in parts
                ),
            )
            for t, parts in topics.items()
        ),
    )


def test_offset_delete_forgets_offsets_but_not_of_subscribed_topics(broker, unique) -> None:
    """Kafka's OffsetDelete: GROUP_ID_NOT_FOUND for an unknown group; a consumer group with
    members keeps the offsets of topics they subscribe to (GROUP_SUBSCRIBED_TO_TOPIC)."""
    from kio.schema.offset_delete.v0.response import OffsetDeleteResponse

    from tests.support.broker_clients import FAST_GROUP

    read, other, group = unique("del-read"), unique("del-other"), unique("g")
    create_topic(broker.bootstrap, read)
    create_topic(broker.bootstrap, other)
    with Wire(broker.bootstrap) as wire:
        unknown = wire.call(_offset_delete(unique("nobody"), {read: [0]}), OffsetDeleteResponse)
        assert unknown.error_code == ErrorCode.group_id_not_found

        wire.call(_commit(group, {read: [(0, 2, -1)], other: [(0, 3, -1)]}), OffsetCommitResponse)
        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group, **FAST_GROUP}
        )
        try:
            consumer.subscribe([read])
            for _ in range(100):
                consumer.poll(0.1)
                if consumer.assignment():
                    break
            assert consumer.assignment(), "the consumer never got its partition"
            response = wire.call(
                _offset_delete(group, {read: [0], other: [0]}), OffsetDeleteResponse
            )
            assert response.error_code == ErrorCode.none
            errors = {t.name: t.partitions[0].error_code for t in response.topics}
            assert errors == {read: ErrorCode.group_subscribed_to_topic, other: ErrorCode.none}
            assert (
                wire.call(_fetch(group, other, [0]), OffsetFetchResponse)
                .topics[0]
                .partitions[0]
                .committed_offset
                == -1
            )
            assert (
                wire.call(_fetch(group, read, [0]), OffsetFetchResponse)
                .topics[0]
                .partitions[0]
                .committed_offset
                == 2
            )
        finally:
            consumer.close()

        emptied = wire.call(_offset_delete(group, {read: [0]}), OffsetDeleteResponse)
        assert emptied.error_code == ErrorCode.none
        assert emptied.topics[0].partitions[0].error_code == ErrorCode.none
        fetched = wire.call(_fetch(group, read, [0]), OffsetFetchResponse)
        assert fetched.topics[0].partitions[0].committed_offset == -1
