"""Manual replica assignments of CreateTopics and CreatePartitions, checked as Kafka does.

This broker is one node, so the only assignment that can be honoured names that
node once per partition; Kafka's controller (`ReplicationControlManager`) accepts
exactly that on a one-broker cluster and refuses the rest with the same codes:
INVALID_REQUEST when a count is given beside the assignment, and
INVALID_REPLICA_ASSIGNMENT for an empty list, a repeated or unregistered broker id,
inconsistent replica counts, or partition indexes that are not 0..n-1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

__all__ = ["AssignmentError", "check_new_partitions", "check_new_topic"]


class AssignmentError(Exception):
    """A refused assignment: the protocol `error` and the message naming what was wrong."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        self.error = error
        self.message = message
        super().__init__(message)


def _replicas(broker_ids: Sequence[int], node_id: int, expected: int | None) -> None:
    if not broker_ids:
        raise AssignmentError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker_id in sorted(int(b) for b in broker_ids):
        if broker_id != node_id:
            raise AssignmentError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker `{broker_id}`, but no such "
                f"broker is registered; this single-node broker is node `{node_id}`.",
            )
        if broker_id == previous:
            raise AssignmentError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker `{broker_id}` more "
                "than once.",
            )
        previous = broker_id
    if expected is not None and len(broker_ids) != expected:
        raise AssignmentError(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes a partition with {len(broker_ids)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{expected} replica(s).",
        )


def check_new_topic(topic: Any, node_id: int) -> int:
    """The partition count a CreateTopics entry with `assignments` asks for;
    `AssignmentError` when Kafka would refuse it."""
    if int(topic.replication_factor) != -1:
        raise AssignmentError(
            ErrorCode.invalid_request,
            f"Topic `{topic.name}`: a manual partition assignment was specified, but "
            f"replication factor `{topic.replication_factor}` was not set to -1.",
        )
    if int(topic.num_partitions) != -1:
        raise AssignmentError(
            ErrorCode.invalid_request,
            f"Topic `{topic.name}`: a manual partition assignment was specified, but "
            f"numPartitions `{topic.num_partitions}` was not set to -1.",
        )
    seen: set[int] = set()
    expected: int | None = None
    for assignment in topic.assignments:
        index = int(assignment.partition_index)
        if index in seen:
            raise AssignmentError(
                ErrorCode.invalid_replica_assignment,
                f"Found multiple manual partition assignments for partition `{index}`.",
            )
        seen.add(index)
        _replicas(assignment.broker_ids, node_id, expected)
        expected = len(assignment.broker_ids)
    if seen != set(range(len(seen))):
        raise AssignmentError(
            ErrorCode.invalid_replica_assignment,
            f"Topic `{topic.name}`: partitions `{sorted(seen)}` should be a consecutive "
            "0-based integer sequence.",
        )
    return len(seen)


def check_new_partitions(topic: Any, current: int, node_id: int) -> None:
    """`AssignmentError` when a CreatePartitions entry's `assignments` cannot be honoured."""
    additional = int(topic.count) - current
    if len(topic.assignments) != additional:
        raise AssignmentError(
            ErrorCode.invalid_replica_assignment,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(topic.assignments)} assignment(s) were specified.",
        )
    for assignment in topic.assignments:
        _replicas(assignment.broker_ids, node_id, 1)  # the topic's replication factor
