"""A consumer group member and the answers it waits for (Kafka's ``MemberMetadata``).

``Member`` holds what one member sent in its JoinGroup (protocols, timeouts),
its last heartbeat and its assignment, and the callbacks of a JoinGroup or
SyncGroup still waiting for an answer; ``JoinResult`` and ``SyncResult`` are
those answers. ``Group`` (group.py) drives them.

Concurrency contract: not thread-safe; owned by its ``Group``, on the broker's
loop thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

__all__ = [
    "JoinCallback",
    "JoinResult",
    "Member",
    "SyncCallback",
    "SyncResult",
    "select_protocol",
    "supports_protocols",
]


@dataclass(frozen=True)
class JoinResult:
    """What a JoinGroup answers; ``members`` is filled for the leader only."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_heartbeat_ms: int
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


def supports_protocols(
    members: Iterable[Member],
    group_protocol_type: str | None,
    protocol_type: str,
    protocols: list[tuple[str, bytes]],
) -> bool:
    """May a member with ``protocols`` join a group of ``members``? It must share the
    group's protocol type and at least one protocol every member supports."""
    members = list(members)
    if not protocols:
        return False
    if not members:
        return True
    if group_protocol_type is not None and protocol_type != group_protocol_type:
        return False
    names = {name for name, _ in protocols}
    common = set.intersection(*({n for n, _ in m.protocols} for m in members))
    return bool(names & common)


def select_protocol(members: Iterable[Member]) -> str:
    """The protocol of the next generation (Kafka's ``selectProtocol``): each member votes
    for its first supported preference among those all support."""
    members = list(members)
    candidates = set.intersection(*({n for n, _ in m.protocols} for m in members))
    votes: dict[str, int] = {}
    for m in members:
        for name, _ in m.protocols:
            if name in candidates:
                votes[name] = votes.get(name, 0) + 1
                break
    # ties go to the leader's (or first member's) preference order
    order = [n for n, _ in members[0].protocols if n in candidates]
    return max(order, key=lambda n: (votes.get(n, 0), -order.index(n)))
