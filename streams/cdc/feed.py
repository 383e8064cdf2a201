"""A window of a table's versions read from its change data feed as changelog records,
in the order the publisher's positions count them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from streams.cdc.changelog import ChangeRecord, PublishMode, changelog_records
from streams.cdc.errors import PublishError


def read_changes(
    delta: DeltaTable,
    path: str,
    name: str,
    topic: str,
    keys: Sequence[str],
    mode: PublishMode,
    first: int,
    last: int,
) -> list[ChangeRecord]:
    try:
        changes = pa.table(delta.load_cdf(starting_version=first, ending_version=last).read_all())
    except DeltaError as e:
        raise PublishError(
            f"table `{name}`: reading the change feed of `{path}` versions {first}..{last} "
            f"failed: {e}. The table needs `delta.enableChangeDataFeed=true` from version "
            f"{first} on (tables created by the warehouse have it), and its change files "
            "must not be vacuumed before they are published.",
            topic=topic,
            table=name,
        ) from e
    records = changelog_records(changes, keys, mode=mode)
    # A fixed order within each version: a transaction may end inside one, and its
    # position counts the version's records published, read again in this order.
    records.sort(key=lambda r: (r.version, r.key))
    return records


class ChangeFeed(Protocol):
    """What a `Publisher` publishes of a table's versions `[first, last]`, in the order its
    positions count them. `clears`: whether a topic the publisher finds without its
    position may hold keys it must tombstone first (a compacted changelog, not a log of
    records such as dead letters)."""

    clears: ClassVar[bool]

    def read(self, delta: DeltaTable, first: int, last: int) -> list[ChangeRecord]: ...


@dataclass(frozen=True)
class TableChanges:
    """A keyed table's changelog (`read_changes`): what a published view publishes."""

    path: str
    name: str
    topic: str
    keys: tuple[str, ...]
    mode: PublishMode

    clears: ClassVar[bool] = True

    def read(self, delta: DeltaTable, first: int, last: int) -> list[ChangeRecord]:
        return read_changes(
            delta, self.path, self.name, self.topic, self.keys, self.mode, first, last
        )
