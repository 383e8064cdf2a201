"""The keys a topic holds that its table does not: what a table built again must delete.

`warehouse reset` deletes a table and its next run builds it again: another Delta table
(another table id) at the same path, published from its version 0. Its change feed
upserts every key it has and deletes the keys it deleted, but says nothing of the keys
only the old table had; a consumer of the compacted topic would keep those rows for
ever. So before it publishes a table from its start, the publisher tombstones the keys
whose latest value in the topic (read_committed, `latest_values`) is not a key of the
table at the version it publishes up to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow.compute as pc
from deltalake import DeltaTable

from streams.cdc.changelog import PublishMode, encode_json
from streams.cdc.ktable import latest_values
from streams.delta import SCD2_COLUMNS, read_table


def table_keys(delta: DeltaTable, keys: Sequence[str], mode: PublishMode) -> set[bytes]:
    """The record keys of the table's rows at its loaded version (an SCD2 table's
    current rows), encoded as the publisher encodes them."""
    is_current = SCD2_COLUMNS[2]
    columns = [*keys, is_current] if mode == "scd2" else list(keys)
    data = read_table(delta, columns=columns)
    if mode == "scd2":
        data = data.filter(pc.fill_null(data.column(is_current), False)).select(list(keys))
    return {encode_json(dict(zip(keys, row, strict=True))) for row in _rows(data, keys)}


def _rows(data: Any, keys: Sequence[str]) -> list[tuple[Any, ...]]:
    columns = [data.column(k).to_pylist() for k in keys]
    return list(zip(*columns, strict=True))


def stale_keys(
    delta: DeltaTable,
    *,
    bootstrap: str,
    topic: str,
    keys: Sequence[str],
    mode: PublishMode,
    client_config: Mapping[str, Any] | None,
    timeout: float,
) -> list[bytes]:
    """The topic's live keys that are no key of the table, in byte order."""
    live = latest_values(bootstrap, topic, client_config=client_config, timeout=timeout)
    if not live:
        return []
    present = table_keys(delta, keys, mode)
    return sorted(k for k in live if k not in present)
