"""One consumer group's membership state machine (Kafka's classic group protocol).

States follow Kafka's ``GroupMetadata``: Empty → PreparingRebalance →
CompletingRebalance → Stable (→ PreparingRebalance on any membership change),
Dead once deleted. The machine is pure: time is passed in as ``now_ms`` and
delayed answers (a JoinGroup that waits for the other members, a SyncGroup
that waits for the leader's assignment) are callbacks the caller supplies, so
the same code runs under asyncio in the server and synchronously in unit tests.
Static members (KIP-345, ``group.instance.id``) keep their place across a restart:
a rejoin under a new member id replaces the old one, which is fenced.

Concurrency contract: not thread-safe; the broker calls it from its single
asyncio loop thread only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from kio.schema.errors import ErrorCode

from streams.broker.coordinator.member import (
    JoinCallback,
    JoinResult,
    Member,
    SyncCallback,
    SyncResult,
    select_protocol,
    supports_protocols,
)

logger = logging.getLogger(__name__)


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Group:
    """Membership and generation of one group; offsets live in ``GroupCoordinator``."""

    group_id: str
    initial_rebalance_delay_ms: int = 0
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # member id -> deadline: ids handed out with MEMBER_ID_REQUIRED, not yet rejoined
    pending_members: dict[str, int] = field(default_factory=dict)
    rebalance_deadline_ms: int = 0
    initial_delay_until_ms: int = 0
    on_change: Callable[[Group], None] | None = None

    # ---- queries -------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        return supports_protocols(
            self.members.values(), self.protocol_type, protocol_type, protocols
        )

    # ---- JoinGroup -----------------------------------------------------------

    def join(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        now_ms: int,
        callback: JoinCallback,
    ) -> None:
        if self.state is GroupState.DEAD:
            callback(JoinResult(ErrorCode.coordinator_not_available, member_id))
            return
        if not self.supports_protocols(protocol_type, protocols):
            callback(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if not member_id and group_instance_id:
            # KIP-345 static member: no MEMBER_ID_REQUIRED round; a restarted instance
            # takes the place of its previous incarnation, which is fenced
            member_id = f"{group_instance_id}-{uuid.uuid4()}"
            old_id = self.member_for_instance(group_instance_id)
            if old_id is not None:
                self._replace_static(
                    old_id,
                    member_id,
                    session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms,
                    protocols=protocols,
                    now_ms=now_ms,
                    callback=callback,
                )
                return
        elif not member_id:
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id:
                # KIP-394: hand out the id first so a retried join cannot leak members.
                self.pending_members[new_id] = now_ms + session_timeout_ms
                callback(JoinResult(ErrorCode.member_id_required, new_id))
                return
            member_id = new_id
        elif member_id in self.pending_members:
            del self.pending_members[member_id]
        else:
            error = self.validate_member(member_id, group_instance_id)
            if error is not ErrorCode.none:
                callback(JoinResult(error, member_id))
                return

        existing = self.members.get(member_id)
        if existing is None:
            member = Member(
                member_id=member_id,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                protocol_type=protocol_type,
                protocols=list(protocols),
                last_heartbeat_ms=now_ms,
                join_callback=callback,
            )
            self.members[member_id] = member
            logger.info(
                "group %s: member %s joins (state %s)", self.group_id, member_id, self.state.value
            )
            self._rebalance_or_complete(now_ms)
            return

        changed = existing.protocols != list(protocols)
        existing.protocols = list(protocols)
        existing.session_timeout_ms = session_timeout_ms
        existing.rebalance_timeout_ms = rebalance_timeout_ms
        existing.last_heartbeat_ms = now_ms
        if existing.join_callback is not None and existing.join_callback is not callback:
            # a retried join replaces the earlier one; answer the old request so it is not leaked
            existing.join_callback(JoinResult(ErrorCode.rebalance_in_progress, member_id))
        if (
            self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
            and not changed
            and (member_id != self.leader_id or self.state is GroupState.COMPLETING_REBALANCE)
        ):
            # a follower rejoining with the same subscription: nothing to rebalance
            callback(self._join_result(existing))
            return
        existing.join_callback = callback
        self._rebalance_or_complete(now_ms)

    def _replace_static(
        self,
        old_id: str,
        new_id: str,
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: list[tuple[str, bytes]],
        now_ms: int,
        callback: JoinCallback,
    ) -> None:
        """A known ``group.instance.id`` joined with an unknown member id (Kafka's
        ``updateStaticMemberAndRebalance``): the member keeps its place and assignment
        under the new id, the old id is fenced. A Stable group whose protocol choice
        does not change answers at once with the current generation; a group waiting
        for SyncGroup rebalances, as the leader may be assigning to the old id."""
        member = self.members[old_id]
        old_leader = self.leader_id
        logger.info(
            "group %s: static member %s rejoined as %s in state %s; old id fenced",
            self.group_id,
            member.group_instance_id,
            new_id,
            self.state.value,
        )
        if member.join_callback is not None:
            member.join_callback(JoinResult(ErrorCode.fenced_instance_id, old_id))
        if member.sync_callback is not None:
            member.sync_callback(SyncResult(ErrorCode.fenced_instance_id))
        member.sync_callback = None
        # keep the member's position: the order of members is the leader's fallback order
        self.members = {(new_id if k == old_id else k): v for k, v in self.members.items()}
        member.member_id = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        member.protocols = list(protocols)
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.last_heartbeat_ms = now_ms
        member.join_callback = callback
        if self.state is GroupState.STABLE:
            if select_protocol(self.members.values()) != self.protocol_name:
                self._prepare_rebalance(now_ms)
                return
            member.join_callback = None
            self._changed()
            # the old leader id, never the new one: a restarted leader must not run the
            # assignor, since a Stable group ignores the assignment of a later SyncGroup
            callback(
                JoinResult(
                    ErrorCode.none,
                    new_id,
                    generation_id=self.generation_id,
                    protocol_type=self.protocol_type,
                    protocol_name=self.protocol_name,
                    leader=old_leader or "",
                )
            )
        elif self.state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(now_ms)
        else:
            self._maybe_complete_join(now_ms)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateCurrentMember``: a request naming a ``group.instance.id``
        whose member id is no longer the instance's current one is fenced."""
        if group_instance_id:
            current = self.member_for_instance(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                logger.info(
                    "group %s: member %s of static instance %s is fenced by member %s",
                    self.group_id,
                    member_id,
                    group_instance_id,
                    current,
                )
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def member_for_instance(self, group_instance_id: str) -> str | None:
        for m in self.members.values():
            if m.group_instance_id == group_instance_id:
                return m.member_id
        return None

    def _rebalance_or_complete(self, now_ms: int) -> None:
        if self.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms)
        else:
            self._prepare_rebalance(now_ms)

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            for m in self.members.values():
                m.assignment = b""
                if m.sync_callback is not None:
                    cb, m.sync_callback = m.sync_callback, None
                    cb(SyncResult(ErrorCode.rebalance_in_progress))
        was_empty = self.state is GroupState.EMPTY
        self.state = GroupState.PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.rebalance_deadline_ms = now_ms + timeout
        self.initial_delay_until_ms = now_ms + self.initial_rebalance_delay_ms if was_empty else 0
        logger.info(
            "group %s: preparing rebalance of generation %d (%d members)",
            self.group_id,
            self.generation_id,
            len(self.members),
        )
        self._maybe_complete_join(now_ms)

    def _maybe_complete_join(self, now_ms: int) -> None:
        if self.state is not GroupState.PREPARING_REBALANCE:
            return
        all_joined = not self.pending_members and all(
            m.join_callback is not None for m in self.members.values()
        )
        if now_ms >= self.rebalance_deadline_ms or (
            all_joined and now_ms >= self.initial_delay_until_ms
        ):
            self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> None:
        # KIP-345: a static member that did not rejoin keeps its place (its session
        # timeout removes it); a dynamic one is dropped
        for member_id in [
            mid
            for mid, m in self.members.items()
            if m.join_callback is None and m.group_instance_id is None
        ]:
            logger.info(
                "group %s: member %s did not rejoin in time; removed", self.group_id, member_id
            )
            del self.members[member_id]
        self.pending_members.clear()
        joined = [mid for mid, m in self.members.items() if m.join_callback is not None]
        if self.members and not joined:
            # only absent static members: wait another rebalance timeout (or their sessions)
            timeout = max(m.rebalance_timeout_ms for m in self.members.values())
            self.rebalance_deadline_ms = now_ms + timeout
            logger.info(
                "group %s: no member rejoined; rebalance waits until %d",
                self.group_id,
                self.rebalance_deadline_ms,
            )
            return
        self.generation_id += 1
        if not self.members:
            self.state = GroupState.EMPTY
            self.protocol_name = None
            self.leader_id = None
            logger.info("group %s: generation %d is empty", self.group_id, self.generation_id)
            self._changed()
            return
        self.protocol_type = next(iter(self.members.values())).protocol_type
        self.protocol_name = select_protocol(self.members.values())
        if self.leader_id not in joined:
            self.leader_id = joined[0]
        self.state = GroupState.COMPLETING_REBALANCE
        logger.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            self.group_id,
            self.generation_id,
            len(self.members),
            self.protocol_name,
            self.leader_id,
        )
        for m in self.members.values():
            m.last_heartbeat_ms = now_ms
            cb, m.join_callback = m.join_callback, None
            if cb is not None:
                cb(self._join_result(m))

    def _join_result(self, member: Member) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == self.leader_id:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()
            )
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=members,
        )

    # ---- SyncGroup -----------------------------------------------------------

    def sync(
        self,
        *,
        member_id: str,
        generation_id: int,
        assignments: dict[str, bytes],
        now_ms: int,
        callback: SyncCallback,
        group_instance_id: str | None = None,
    ) -> None:
        member = self.members.get(member_id)
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            callback(SyncResult(ErrorCode.unknown_member_id))
            return
        error = self.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none or member is None:
            callback(SyncResult(error))
            return
        if generation_id != self.generation_id:
            callback(SyncResult(ErrorCode.illegal_generation))
            return
        if self.state is GroupState.PREPARING_REBALANCE:
            callback(SyncResult(ErrorCode.rebalance_in_progress))
            return
        member.last_heartbeat_ms = now_ms
        if self.state is GroupState.STABLE:
            callback(self._sync_result(member))
            return
        if member.sync_callback is not None and member.sync_callback is not callback:
            # a retried sync replaces the earlier one; answer the old request so it is not leaked
            member.sync_callback(SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_callback = callback
        if member_id == self.leader_id:
            for m in self.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self.state = GroupState.STABLE
            logger.info("group %s: generation %d is stable", self.group_id, self.generation_id)
            for m in self.members.values():
                if m.sync_callback is not None:
                    cb, m.sync_callback = m.sync_callback, None
                    cb(self._sync_result(m))
            self._changed()

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.none, member.assignment, self.protocol_type, self.protocol_name)

    # ---- Heartbeat / LeaveGroup ----------------------------------------------

    def heartbeat(
        self,
        *,
        member_id: str,
        generation_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        member = self.members.get(member_id)
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return ErrorCode.unknown_member_id
        error = self.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none or member is None:
            return error
        # Kafka checks the generation before the state: a heartbeat of an older
        # generation is ILLEGAL_GENERATION even while a rebalance is being prepared, and
        # it does not keep the member's session alive.
        if generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        member.last_heartbeat_ms = now_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, member_id: str, now_ms: int, group_instance_id: str | None = None) -> ErrorCode:
        """LeaveGroup of one member. An empty ``member_id`` removes the static member of
        ``group_instance_id`` (an administrative removal, KIP-345); a member id together
        with an instance id must be the instance's current one (else FENCED_INSTANCE_ID)."""
        if not member_id:
            member_id = self.member_for_instance(group_instance_id or "") or ""
            if not member_id:
                return ErrorCode.unknown_member_id
        elif self.pending_members.pop(member_id, None) is not None:
            self._maybe_complete_join(now_ms)
            return ErrorCode.none
        else:
            error = self.validate_member(member_id, group_instance_id)
            if error is not ErrorCode.none:
                return error
        member = self.members[member_id]
        logger.info("group %s: member %s leaves", self.group_id, member_id)
        self._remove_member(member, now_ms)
        return ErrorCode.none

    def _remove_member(self, member: Member, now_ms: int) -> None:
        del self.members[member.member_id]
        if member.join_callback is not None:
            member.join_callback(JoinResult(ErrorCode.unknown_member_id, member.member_id))
        if member.sync_callback is not None:
            member.sync_callback(SyncResult(ErrorCode.unknown_member_id))
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms)
        elif self.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms)

    # ---- time ----------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Expire silent members and pending ids, complete a rebalance whose timeout passed."""
        for member_id, deadline in list(self.pending_members.items()):
            if now_ms >= deadline:
                del self.pending_members[member_id]
        for member in list(self.members.values()):
            if member.member_id not in self.members:
                continue
            awaiting_join = (
                self.state is GroupState.PREPARING_REBALANCE and member.join_callback is not None
            )
            if not awaiting_join and now_ms - member.last_heartbeat_ms > member.session_timeout_ms:
                logger.info(
                    "group %s: member %s session timed out after %d ms; removed",
                    self.group_id,
                    member.member_id,
                    member.session_timeout_ms,
                )
                self._remove_member(member, now_ms)
        self._maybe_complete_join(now_ms)

    def mark_dead(self) -> None:
        for member in list(self.members.values()):
            if member.join_callback is not None:
                member.join_callback(
                    JoinResult(ErrorCode.coordinator_not_available, member.member_id)
                )
            if member.sync_callback is not None:
                member.sync_callback(SyncResult(ErrorCode.coordinator_not_available))
        self.members.clear()
        self.pending_members.clear()
        self.state = GroupState.DEAD

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)
