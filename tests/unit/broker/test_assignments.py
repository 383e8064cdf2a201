"""Manual replica assignments: accepted when they name this node, refused as Kafka does."""

from __future__ import annotations

import pytest
from kio.schema.create_topics.v7.request import CreatableReplicaAssignment, CreatableTopic
from kio.schema.errors import ErrorCode

from streams.broker.handlers.assignments import AssignmentError, check_new_topic


def _topic(lists: dict[int, list[int]], *, partitions: int = -1, rf: int = -1) -> CreatableTopic:
    return CreatableTopic(
        name="t",
        num_partitions=partitions,
        replication_factor=rf,
        assignments=tuple(
            CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(ids))
            for p, ids in lists.items()
        ),
        configs=(),
    )


def test_assignment_of_this_node_gives_the_partition_count() -> None:
    assert check_new_topic(_topic({0: [3], 1: [3], 2: [3]}), node_id=3) == 3


@pytest.mark.parametrize(
    ("topic", "error", "words"),
    [
        (_topic({0: [0]}, partitions=1), ErrorCode.invalid_request, "numPartitions"),
        (_topic({0: [0]}, rf=1), ErrorCode.invalid_request, "replication factor"),
        (_topic({0: []}), ErrorCode.invalid_replica_assignment, "empty replica list"),
        (_topic({0: [7]}), ErrorCode.invalid_replica_assignment, "broker `7`"),
        (_topic({0: [0, 0]}), ErrorCode.invalid_replica_assignment, "more than once"),
        (_topic({0: [0], 2: [0]}), ErrorCode.invalid_replica_assignment, "consecutive"),
    ],
    ids=["count-set", "rf-set", "empty", "unknown-broker", "repeated", "gap"],
)
def test_refused_assignments_name_what_is_wrong(topic, error, words) -> None:
    with pytest.raises(AssignmentError) as info:
        check_new_topic(topic, node_id=0)
    assert info.value.error == error
    assert words in info.value.message
