"""CDC in (stream → table): Debezium and upsert records into SCD1 and SCD2 tables.

Every case runs the real path of a CDC table's batch: Kafka-shaped records,
`parse_kafka` (debezium-json / upsert-json), `write_batch` into a real Delta table
(`upsert` = SCD1, `scd2` = history), and compares the whole table after the last
batch. Replaying the last batch id must leave the table as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import Row

from streams.delta import DeltaTarget, write_batch
from streams.kafka import parse_kafka
from tests.integration.cdc.helpers import (
    USERS_DDL,
    debezium,
    kafka_frame,
    kafka_time,
    read_table,
    ts,
    user,
)
from tests.support.rows import assert_rows

pytestmark = pytest.mark.spark


def c(uid: int, name: str, city: str, t: int) -> tuple:
    return ({"user_id": uid}, debezium("c", t, after=user(uid, name, city)))


def r(uid: int, name: str, city: str, t: int) -> tuple:
    return ({"user_id": uid}, debezium("r", t, after=user(uid, name, city)))


def u(uid: int, name: str, city: str, t: int) -> tuple:
    return (
        {"user_id": uid},
        debezium("u", t, before=user(uid), after=user(uid, name, city)),
    )


def d(uid: int, t: int) -> tuple:
    return ({"user_id": uid}, debezium("d", t, before=user(uid, "x", "x")))


def tomb(uid: int) -> tuple:
    return ({"user_id": uid}, None)


# case -> (batches, SCD1 rows (user_id, name, city), SCD2 rows (+ valid_from, valid_to, current))
CASES = {
    "insert": (
        [[c(1, "ann", "paris", 100), c(2, "bob", "rome", 100)]],
        [(1, "ann", "paris"), (2, "bob", "rome")],
        [(1, "ann", "paris", 100, None, True), (2, "bob", "rome", 100, None, True)],
    ),
    "update": (
        [[c(1, "ann", "paris", 100)], [u(1, "ann", "oslo", 200)]],
        [(1, "ann", "oslo")],
        [(1, "ann", "paris", 100, 200, False), (1, "ann", "oslo", 200, None, True)],
    ),
    "delete": (
        [
            [c(1, "ann", "paris", 100), c(2, "bob", "rome", 100)],
            [d(1, 200), tomb(1)],  # Debezium follows a delete with a tombstone
        ],
        [(2, "bob", "rome")],
        [(1, "ann", "paris", 100, 200, False), (2, "bob", "rome", 100, None, True)],
    ),
    "out_of_order": (
        [
            # within a batch: the newest change per key wins (SCD2: the chain is reordered)
            [c(1, "ann", "paris", 100), u(1, "ann", "oslo", 300), u(1, "ann", "lima", 200)],
            # across batches: older than what the table holds, ignored
            [u(1, "ann", "kyiv", 250)],
        ],
        [(1, "ann", "oslo")],
        [
            (1, "ann", "paris", 100, 200, False),
            (1, "ann", "lima", 200, 300, False),
            (1, "ann", "oslo", 300, None, True),
        ],
    ),
    "duplicate": (
        [
            [c(1, "ann", "paris", 100), c(1, "ann", "paris", 100)],
            [c(1, "ann", "paris", 100), u(1, "ann", "oslo", 200), u(1, "ann", "oslo", 200)],
        ],
        [(1, "ann", "oslo")],
        [(1, "ann", "paris", 100, 200, False), (1, "ann", "oslo", 200, None, True)],
    ),
    "delete_then_reinsert": (
        [
            [c(1, "ann", "paris", 100)],
            [d(1, 200), tomb(1), c(1, "ann", "lima", 300)],  # in one batch
            [d(1, 400)],
            [c(1, "ann", "kyiv", 500)],  # across batches
        ],
        [(1, "ann", "kyiv")],
        [
            (1, "ann", "paris", 100, 200, False),
            (1, "ann", "lima", 300, 400, False),
            (1, "ann", "kyiv", 500, None, True),
        ],
    ),
    "delete_before_insert": (
        # the delete overtook the insert it follows: SCD1 keeps a tombstone of the key,
        # SCD2 a zero-length version; both ignore the late insert
        [[d(1, 300)], [c(1, "ann", "paris", 200)]],
        [],
        [(1, "x", "x", 300, 300, False)],
    ),
    "late_change_after_delete": (
        # an update older than the delete arrives in a later batch: the key stays deleted
        [[c(1, "ann", "paris", 100)], [d(1, 300), tomb(1)], [u(1, "ann", "oslo", 200)]],
        [],
        [(1, "ann", "paris", 100, 300, False)],
    ),
    "snapshot": (
        [
            [r(1, "ann", "paris", 100), r(2, "bob", "rome", 100)],  # initial state
            [u(1, "ann", "oslo", 200), r(3, "cy", "bern", 150), u(2, "bob", "rome", 90)],
        ],
        [(1, "ann", "oslo"), (2, "bob", "rome"), (3, "cy", "bern")],
        [
            (1, "ann", "paris", 100, 200, False),
            (1, "ann", "oslo", 200, None, True),
            (2, "bob", "rome", 100, None, True),
            (3, "cy", "bern", 150, None, True),
        ],
    ),
}


def _shift(record: tuple, base: int) -> tuple:
    """The record with `base` added to its user ids: each case gets its own keys."""
    key, value = record
    key = {"user_id": key["user_id"] + base}
    if value is not None:
        env = json.loads(value)
        for image in ("before", "after"):
            if env.get(image):
                env[image]["user_id"] += base
        value = json.dumps(env)
    return key, value


def _combined() -> tuple[list[list[tuple]], list[tuple], list[tuple]]:
    """All cases at once, case k on user ids 100*k + i: batch b holds every case's batch b."""
    batches: list[list[tuple]] = []
    scd1: list[tuple] = []
    scd2: list[tuple] = []
    for k, name in enumerate(sorted(CASES), start=1):
        case_batches, case_scd1, case_scd2 = CASES[name]
        base = 100 * k
        for b, records in enumerate(case_batches):
            if len(batches) <= b:
                batches.append([])
            batches[b].extend(_shift(rec, base) for rec in records)
        scd1 += [(i + base, *rest) for i, *rest in case_scd1]
        scd2 += [(i + base, *rest) for i, *rest in case_scd2]
    return batches, scd1, scd2


def _run(spark, target: DeltaTarget, batches: list[list[tuple]], fmt: str = "debezium-json"):
    offset = 0
    frames = []
    for batch_id, records in enumerate(batches):
        frame = kafka_frame(spark, records, first_offset=offset)
        offset += len(records)
        good = parse_kafka(frame, format=fmt, schema=USERS_DDL).good
        assert write_batch(good, batch_id, target) is not None
        frames.append(good)
    return frames


def _assert_replay_is_noop(target: DeltaTarget, frames: list) -> None:
    version = DeltaTable(target.path).version()
    assert write_batch(frames[-1], len(frames) - 1, target) is None
    assert DeltaTable(target.path).version() == version


def test_every_cdc_case_into_scd1_upsert(spark, tmp_path: Path, engine: str) -> None:
    batches, scd1, _ = _combined()
    target = DeltaTarget(
        str(tmp_path / "dim_users"),
        mode="upsert",
        keys=["user_id"],
        sequence_by="_source_ts_ms",
        app_id="dim_users:q",
        engine=engine,
    )
    frames = _run(spark, target, batches)
    expected = [Row(user_id=i, name=n, city=c_) for i, n, c_ in scd1]
    assert_rows(read_table(spark, target.path, ["user_id", "name", "city"]), expected)
    _assert_replay_is_noop(target, frames)
    assert_rows(read_table(spark, target.path, ["user_id", "name", "city"]), expected)


def test_every_cdc_case_into_scd2_history(spark, tmp_path: Path, engine: str) -> None:
    batches, _, scd2 = _combined()
    target = DeltaTarget(
        str(tmp_path / "dim_users"),
        mode="scd2",
        keys=["user_id"],
        sequence_by="_source_ts_ms",
        app_id="dim_users:q",
        engine=engine,
    )
    frames = _run(spark, target, batches)
    columns = ["user_id", "name", "city", "valid_from", "valid_to", "is_current"]
    stored = [f.name for f in DeltaTable(target.path).schema().fields]
    assert stored == [
        *columns[:3],
        "_source_ts_ms",
        "_source_lsn",
        "_topic",
        "_partition",
        "_offset",
        "_timestamp",
        *columns[3:],
    ]
    expected = [
        Row(
            user_id=i,
            name=n,
            city=c_,
            valid_from=ts(f),
            valid_to=None if t is None else ts(t),
            is_current=cur,
        )
        for i, n, c_, f, t, cur in scd2
    ]
    assert_rows(read_table(spark, target.path, columns), expected)
    _assert_replay_is_noop(target, frames)
    assert_rows(read_table(spark, target.path, columns), expected)


UPSERT_BATCHES = [
    [
        ({"user_id": 1}, '{"user_id": 1, "name": "ann", "city": "paris"}'),
        ({"user_id": 2}, '{"user_id": 2, "name": "bob", "city": "rome"}'),
        ({"user_id": 1}, '{"user_id": 1, "name": "ann", "city": "oslo"}'),
    ],
    [
        ({"user_id": 2}, None),  # null value = delete
        ({"user_id": 3}, '{"user_id": 3, "name": "cy", "city": "bern"}'),
        ({"user_id": 2}, '{"user_id": 2, "name": "bob", "city": "lima"}'),  # reinsert
    ],
]


def test_upsert_json_into_scd1(spark, tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "users"), mode="upsert", keys=["user_id"], app_id="users:q")
    frames = _run(spark, target, UPSERT_BATCHES, fmt="upsert-json")
    assert_rows(
        read_table(spark, target.path, ["user_id", "name", "city"]),
        [
            Row(user_id=1, name="ann", city="oslo"),
            Row(user_id=2, name="bob", city="lima"),
            Row(user_id=3, name="cy", city="bern"),
        ],
    )
    _assert_replay_is_noop(target, frames)


def test_upsert_json_into_scd2_ordered_by_offset_dated_by_kafka_time(spark, tmp_path: Path) -> None:
    """A sequence that is not a time (`_offset`) orders; `valid_from` is the Kafka timestamp."""
    target = DeltaTarget(
        str(tmp_path / "users"),
        mode="scd2",
        keys=["user_id"],
        sequence_by="_offset",
        app_id="users:q",
    )
    frames = _run(spark, target, UPSERT_BATCHES, fmt="upsert-json")
    columns = ["user_id", "city", "valid_from", "valid_to", "is_current"]
    assert_rows(
        read_table(spark, target.path, columns),
        [
            Row(
                user_id=1,
                city="paris",
                valid_from=kafka_time(0),
                valid_to=kafka_time(2),
                is_current=False,
            ),
            Row(user_id=1, city="oslo", valid_from=kafka_time(2), valid_to=None, is_current=True),
            Row(
                user_id=2,
                city="rome",
                valid_from=kafka_time(1),
                valid_to=kafka_time(3),
                is_current=False,
            ),
            # the delete, remembered as a zero-length version: `_offset` is not a time, so
            # `valid_to` alone could not keep an older change out
            Row(
                user_id=2,
                city=None,
                valid_from=kafka_time(3),
                valid_to=kafka_time(3),
                is_current=False,
            ),
            Row(user_id=2, city="lima", valid_from=kafka_time(5), valid_to=None, is_current=True),
            Row(user_id=3, city="bern", valid_from=kafka_time(4), valid_to=None, is_current=True),
        ],
    )
    _assert_replay_is_noop(target, frames)
