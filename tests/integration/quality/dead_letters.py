"""What the dead-letter tests check: that a dead-letter topic holds exactly a quarantine
table's records, each once, as they were produced."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from streams.cdc.deadletter import (
    HEADER_CONNECTOR,
    HEADER_EXPECTATIONS,
    HEADER_MESSAGE,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_STAGE,
    HEADER_TOPIC,
)
from streams.delta.arrow import read_table
from tests.support.broker_clients import read_topic


def assert_dead_letters(
    bootstrap: str,
    dlq: str,
    source: str,
    quarantine: Path | str,
    table: str,
    *,
    client_config: dict[str, str] | None = None,
) -> int:
    """`dlq` holds one dead letter per row of the quarantine table `quarantine` (of
    `table`, reading `source`): the source record's key and value bytes, the Connect
    headers naming its coordinates, the table and the row's reason. Returns how many.
    `client_config`: the cluster's client properties (security)."""
    produced = {
        (r.partition, r.offset): r
        for r in read_topic(bootstrap, source, client_config=client_config)
    }
    rows = read_table(str(quarantine)).to_pylist()
    letters = read_topic(bootstrap, dlq, client_config=client_config)
    by_coordinates = Counter(
        (int(r.headers[HEADER_PARTITION]), int(r.headers[HEADER_OFFSET])) for r in letters
    )
    expected = Counter((r["source_partition"], r["source_offset"]) for r in rows)
    assert by_coordinates == expected, "dead letters are not the quarantined records, once each"
    quarantined = {(r["source_partition"], r["source_offset"]): r for r in rows}
    for letter in letters:
        h = letter.headers
        at = (int(h[HEADER_PARTITION]), int(h[HEADER_OFFSET]))
        original, row = produced[at], quarantined[at]
        assert (letter.key, letter.value) == (original.key, original.value), at
        assert h[HEADER_TOPIC] == source.encode()
        assert h[HEADER_CONNECTOR] == table.encode()
        assert h[HEADER_MESSAGE] == row["reason"].encode()
        failed = row["failed_expectations"]
        assert h[HEADER_STAGE] == (b"EXPECTATION" if failed else b"PARSE")
        assert h.get(HEADER_EXPECTATIONS) == (", ".join(failed).encode() if failed else None)
    return len(letters)
