"""The group coordinator: every consumer group, its committed offsets, their persistence.

Groups are ``Group`` state machines (``group.py``); committed offsets are kept
here per group and written to ``__consumer_offsets`` (``internal_log.py``) as
``{"t": "o", "g": group, "tp": [topic, partition]}`` → ``{"offset", "epoch",
"metadata", "ts"}`` and group metadata as ``{"t": "g", "g": group}`` →
``{"generation", "protocol_type", "protocol", "leader", "state"}``. On start the
log is replayed; a group comes back Empty (members must rejoin, as after a
Kafka coordinator failover) with its generation and offsets.

Every change is appended to the log first and applied in memory only once the
append returned, as Kafka's ``GroupMetadataManager.storeOffsets`` applies offsets
in its append callback: a failed append (disk full, the log dir offline) raises
``KafkaStorageError`` and leaves memory as the log has it; ``append_error_code``
is what the client is told.

Concurrency contract: not thread-safe; the broker calls it from its single
asyncio loop thread only. ``now_ms`` is always passed in (injectable clock).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.coordinator.group import Group, GroupState
from streams.broker.coordinator.internal_log import CONSUMER_OFFSETS, InternalLog
from streams.broker.errors import BrokerError

logger = logging.getLogger(__name__)


def append_error_code(error: BrokerError) -> ErrorCode:
    """What a client is told when the coordinator's log append failed (Kafka's mapping in
    ``GroupMetadataManager``): a storage error makes this broker no coordinator for now
    (NOT_COORDINATOR: the client looks the coordinator up again and retries), a
    record too large is the commit's fault, anything else is passed on."""
    code = error.error_code
    if code in (ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower):
        return ErrorCode.not_coordinator
    if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.invalid_commit_offset_size
    return code


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1


class GroupCoordinator:
    """All groups of this broker (it is the coordinator of every group)."""

    def __init__(
        self,
        log_manager: Any | None,
        *,
        initial_rebalance_delay_ms: int = 0,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 1_800_000,
    ) -> None:
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self._log = InternalLog(log_manager, CONSUMER_OFFSETS) if log_manager is not None else None
        self._now_ms = 0
        if self._log is not None:
            self._load()

    # ---- persistence ---------------------------------------------------------

    def _load(self) -> None:
        assert self._log is not None
        n = 0
        for key, value in self._log.replay():
            n += 1
            group_id = key.get("g")
            if key.get("t") == "o":
                topic, partition = key["tp"]
                offsets = self.offsets.setdefault(group_id, {})
                if value is None:
                    offsets.pop((topic, partition), None)
                else:
                    offsets[(topic, partition)] = CommittedOffset(
                        value["offset"],
                        value.get("epoch", -1),
                        value.get("metadata"),
                        value.get("ts", -1),
                    )
            elif key.get("t") == "g":
                if value is None:
                    self.groups.pop(group_id, None)
                    self.offsets.pop(group_id, None)
                else:
                    group = self._new_group(group_id)
                    group.generation_id = value["generation"]
                    group.protocol_type = value.get("protocol_type")
                    self.groups[group_id] = group
        logger.info(
            "loaded %d records from %s: %d groups, %d with offsets",
            n,
            CONSUMER_OFFSETS,
            len(self.groups),
            len(self.offsets),
        )

    @staticmethod
    def _group_record(group: Group) -> tuple[dict[str, Any], dict[str, Any]]:
        value = {
            "generation": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol": group.protocol_name,
            "leader": group.leader_id,
            "state": group.state.value,
            "members": sorted(group.members),
        }
        return {"t": "g", "g": group.group_id}, value

    def _persist_group(self, group: Group) -> None:
        if self._log is None:
            return
        self._log.append([self._group_record(group)], now_ms=self._now_ms)

    # ---- groups --------------------------------------------------------------

    def _new_group(self, group_id: str) -> Group:
        return Group(
            group_id,
            initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
            on_change=self._persist_group,
        )

    def get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = self._new_group(group_id)
        return group

    def validate_session_timeout(self, session_timeout_ms: int) -> ErrorCode:
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return ErrorCode.invalid_session_timeout
        return ErrorCode.none

    def tick(self, now_ms: int) -> None:
        self._now_ms = now_ms
        for group in list(self.groups.values()):
            group.tick(now_ms)

    def set_now(self, now_ms: int) -> None:
        self._now_ms = now_ms

    def list_groups(self, states: set[str] | None = None) -> list[tuple[str, str, str]]:
        """``(group_id, protocol_type, state)`` of live groups, optionally filtered by state
        (compared case-insensitively, as Kafka does: ``stable`` matches ``Stable``)."""
        wanted = {s.strip().lower() for s in states or ()}
        out = []
        for group in self.groups.values():
            if group.state is GroupState.DEAD:
                continue
            if wanted and group.state.value.lower() not in wanted:
                continue
            out.append((group.group_id, group.protocol_type or "", group.state.value))
        return out

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None and group_id not in self.offsets:
            return ErrorCode.group_id_not_found
        if group is not None and not group.is_empty():
            return ErrorCode.non_empty_group
        offsets = self.offsets.get(group_id, {})
        if self._log is not None:
            records: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
                ({"t": "o", "g": group_id, "tp": [t, p]}, None) for t, p in offsets
            ]
            records.append(({"t": "g", "g": group_id}, None))
            try:
                self._log.append(records, now_ms=self._now_ms)
            except BrokerError as e:
                logger.error("group %s: not deleted, the log append failed: %s", group_id, e)
                return append_error_code(e)
        if group is not None:
            group.mark_dead()
            del self.groups[group_id]
        self.offsets.pop(group_id, None)
        logger.info("group %s deleted with %d committed offsets", group_id, len(offsets))
        return ErrorCode.none

    # ---- offsets -------------------------------------------------------------

    def validate_commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        *,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        """May this member commit now? Mirrors Kafka's checks for the classic protocol,
        FENCED_INSTANCE_ID for a replaced incarnation of a static member included."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation
        if generation_id < 0 and not member_id and not group.members:
            return ErrorCode.none  # a standalone consumer (assign + commit) of an empty group
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def commit_offsets(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], CommittedOffset],
        *,
        now_ms: int,
    ) -> None:
        """Store ``offsets`` of ``group_id`` (creating the group): appended first, then
        applied; raises ``KafkaStorageError`` with nothing applied when the append fails."""
        if not offsets:
            return
        self._now_ms = now_ms
        new_group = None if group_id in self.groups else self._new_group(group_id)
        records: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        if new_group is not None:
            records.append(self._group_record(new_group))
        records += [
            (
                {"t": "o", "g": group_id, "tp": [t, p]},
                {
                    "offset": o.offset,
                    "epoch": o.leader_epoch,
                    "metadata": o.metadata,
                    "ts": o.commit_timestamp_ms,
                },
            )
            for (t, p), o in offsets.items()
        ]
        if self._log is not None:
            try:
                self._log.append(records, now_ms=now_ms)
            except BrokerError as e:
                logger.error(
                    "group %s: offsets of %d partition(s) not committed, the log append failed: %s",
                    group_id,
                    len(offsets),
                    e,
                )
                raise
        if new_group is not None:
            self.groups[group_id] = new_group
        self.offsets.setdefault(group_id, {}).update(offsets)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        """Forget the committed offsets of ``partitions`` (OffsetDelete); missing ones are
        ignored, as in Kafka."""
        stored = self.offsets.get(group_id, {})
        gone = [tp for tp in dict.fromkeys(partitions) if tp in stored]
        if gone and self._log is not None:
            self._log.append(  # raises KafkaStorageError; nothing is forgotten then
                [({"t": "o", "g": group_id, "tp": [t, p]}, None) for t, p in gone],
                now_ms=self._now_ms,
            )
        for tp in gone:
            del stored[tp]
        if gone:
            logger.info("group %s: deleted committed offsets of %s", group_id, gone)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], CommittedOffset]:
        """Committed offsets of ``partitions`` (all when ``None``); missing ones are omitted."""
        stored = self.offsets.get(group_id, {})
        if partitions is None:
            return dict(stored)
        return {tp: stored[tp] for tp in partitions if tp in stored}

    def flush(self) -> None:
        if self._log is not None:
            self._log.flush()
