"""Consumer groups, committed offsets, idempotent producers, transactions, SASL/PLAIN.

The server plugs this package in through ``streams.broker.coordinator.handlers``
(``HANDLERS``, ``API_VERSIONS``, ``create_extension``); state lives in the
internal compacted topics ``__consumer_offsets`` and ``__transaction_state``.
"""

from __future__ import annotations

from streams.broker.coordinator.coordinator import Coordinator
from streams.broker.coordinator.group import Group, GroupState
from streams.broker.coordinator.groups import CommittedOffset, GroupCoordinator
from streams.broker.coordinator.member import JoinResult, SyncResult
from streams.broker.coordinator.producer_state import ProducerStateManager
from streams.broker.coordinator.transactions import TransactionCoordinator
from streams.broker.coordinator.txn_metadata import TxnState

__all__ = [
    "CommittedOffset",
    "Coordinator",
    "Group",
    "GroupCoordinator",
    "GroupState",
    "JoinResult",
    "ProducerStateManager",
    "SyncResult",
    "TransactionCoordinator",
    "TxnState",
]
