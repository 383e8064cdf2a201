"""One transactional id's state and how it is stored (Kafka's ``TransactionMetadata``).

``TxnMetadata`` is the producer id and epoch, timeout, ``TxnState``, and the
partitions, groups and pending offset commits of the open transaction; its
JSON form is the value of the id's record in ``__transaction_state``.
``TransactionCoordinator`` (transactions.py) moves it through its states.

Concurrency contract: not thread-safe; owned by the coordinator, on the
broker's loop thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from streams.broker.coordinator.groups import CommittedOffset

__all__ = ["TxnMetadata", "TxnState"]


class TxnState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    pending_offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    start_ms: int = -1

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.producer_id,
            "epoch": self.epoch,
            "timeout": self.timeout_ms,
            "state": self.state.value,
            "partitions": sorted([t, p] for t, p in self.partitions),
            "groups": sorted(self.groups),
            "offsets": {
                g: [[t, p, o.offset, o.leader_epoch, o.metadata] for (t, p), o in offs.items()]
                for g, offs in self.pending_offsets.items()
            },
            "start": self.start_ms,
        }

    @classmethod
    def from_json(cls, transactional_id: str, v: dict[str, Any]) -> TxnMetadata:
        return cls(
            transactional_id,
            v["pid"],
            v["epoch"],
            v["timeout"],
            TxnState(v["state"]),
            {(t, p) for t, p in v["partitions"]},
            set(v["groups"]),
            {
                g: {(t, p): CommittedOffset(o, e, m) for t, p, o, e, m in offs}
                for g, offs in v["offsets"].items()
            },
            v["start"],
        )
