"""Transaction admin APIs, as `kafka-transactions list|describe` use them:
DescribeTransactions (65) v0 and ListTransactions (66) v0–v2.

Both read the coordinator's `TxnMetadata`; neither changes anything. State names are
Kafka's (`Empty`, `Ongoing`, `PrepareCommit`, ...). ListTransactions filters as Kafka's
TransactionStateManager does: by state (names it does not know are returned in
`unknown_state_filters` and match nothing), by producer id, from v1 by how long an open
transaction has been running (`duration_filter` ms, -1: any), from v2 by a regular
expression the whole transactional id must match.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.coordinator.coordinator import Coordinator
from streams.broker.coordinator.txn_metadata import TxnMetadata, TxnState
from streams.broker.protocol import make, response_module

DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
_ZERO = timedelta(0)
_STATES = {s.value for s in TxnState}


def _coord(ctx: RequestContext) -> Coordinator:
    return ctx.broker.extension  # type: ignore[return-value]


def _time(ms: int) -> datetime:
    """Milliseconds since the epoch as kio's timestamp; -1 (none) stays -1 on the wire."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


async def describe_transactions(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_TRANSACTIONS, ctx.api_version)
    coord = _coord(ctx)
    txns = coord.txns.txns if coord.txns is not None else {}
    states = []
    for tid in request.transactional_ids:
        txn = txns.get(tid)
        if txn is None:
            states.append(
                make(
                    module.TransactionState,
                    error_code=ErrorCode.transactional_id_not_found,
                    transactional_id=tid,
                    transaction_state="",
                    transaction_timeout=_ZERO,
                    transaction_start_time=_time(-1),
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(
            make(
                module.TransactionState,
                error_code=ErrorCode.none,
                transactional_id=tid,
                transaction_state=txn.state.value,
                transaction_timeout=timedelta(milliseconds=txn.timeout_ms),
                transaction_start_time=_time(txn.start_ms),
                producer_id=txn.producer_id,
                producer_epoch=txn.epoch,
                topics=tuple(
                    make(module.TopicData, topic=t, partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            )
        )
    return make(
        module.DescribeTransactionsResponse, throttle_time=_ZERO, transaction_states=tuple(states)
    )


def _listed(txn: TxnMetadata, request: Any, states: set[str], now_ms: int) -> bool:
    if request.state_filters and txn.state.value not in states:
        return False
    if request.producer_id_filters and txn.producer_id not in request.producer_id_filters:
        return False
    duration = int(getattr(request, "duration_filter", -1))
    if duration >= 0 and (txn.start_ms < 0 or now_ms - txn.start_ms < duration):
        return False
    pattern = getattr(request, "transactional_id_pattern", None)
    return not pattern or re.fullmatch(pattern, txn.transactional_id) is not None


async def list_transactions(ctx: RequestContext, request: Any) -> Any:
    module = response_module(LIST_TRANSACTIONS, ctx.api_version)
    coord = _coord(ctx)
    txns = coord.txns.txns if coord.txns is not None else {}
    pattern = getattr(request, "transactional_id_pattern", None)
    if pattern:
        try:
            re.compile(pattern)
        except re.error:
            return make(
                module.ListTransactionsResponse,
                throttle_time=_ZERO,
                error_code=ErrorCode.invalid_regular_expression,
                unknown_state_filters=(),
                transaction_states=(),
            )
    unknown = tuple(s for s in request.state_filters if s not in _STATES)
    states = set(request.state_filters) - set(unknown)
    now = coord.now_ms()
    listed = tuple(
        make(
            module.TransactionState,
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            transaction_state=txn.state.value,
        )
        for txn in sorted(txns.values(), key=lambda t: t.transactional_id)
        if _listed(txn, request, states, now)
    )
    return make(
        module.ListTransactionsResponse,
        throttle_time=_ZERO,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=listed,
    )


APIS = [
    (DESCRIBE_TRANSACTIONS, (0, 0), describe_transactions),
    (LIST_TRANSACTIONS, (0, 2), list_transactions),
]
