"""SCD2 planning without Spark or Delta: version chains, stale changes, time rules."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.delta.scd2_plan import (
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    KeyState,
    change_time,
    plan_scd2,
    time_like,
)

UTC = dt.UTC
NOW = dt.datetime(2030, 1, 1, tzinfo=UTC)


def t(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)


def change(uid: int, ts: int, op: str = "u", city: str = "x", offset: int = 0) -> dict:
    """A change; `lsn` is a sequence that is not a time (same order as `_source_ts_ms`)."""
    return {
        "user_id": uid,
        "city": city,
        "_op": op,
        "_source_ts_ms": ts,
        "lsn": ts,
        "_offset": offset,
    }


def plan(changes, state=None, *, seq="_source_ts_ms", stored=("user_id", "city")):
    return plan_scd2(
        changes,
        state or {},
        keys=["user_id"],
        sequence_by=seq,
        time_of=change_time(seq, pa.int64(), NOW),
        time_ordered=time_like(seq, pa.int64()),
        stored=list(stored),
    )


def test_chain_closes_current_then_delete_then_reinsert_in_one_batch() -> None:
    state = {(1,): KeyState(has_current=True, last_time=t(100))}
    p = plan(
        [
            change(1, 400, "c", "lima", offset=4),
            change(1, 200, "u", "oslo", offset=2),
            change(1, 50, "u", "stale", offset=5),
            change(1, 300, "d", offset=3),
        ],
        state,
    )
    assert p.closes == [{"user_id": 1, VALID_TO: t(200)}]
    assert p.inserts == [
        {"user_id": 1, "city": "oslo", VALID_FROM: t(200), VALID_TO: t(300), IS_CURRENT: False},
        {"user_id": 1, "city": "lima", VALID_FROM: t(400), VALID_TO: None, IS_CURRENT: True},
    ]
    assert p.stale == 1


def test_equal_sequence_keeps_the_last_delivery() -> None:
    p = plan([change(1, 100, "c", "a", offset=7), change(1, 100, "c", "b", offset=9)])
    assert [r["city"] for r in p.inserts] == ["b"]


def test_a_delete_that_closes_nothing_is_recorded_as_a_zero_length_version() -> None:
    state = {(2,): KeyState(has_current=False, last_time=t(100))}
    p = plan([change(1, 10, "d"), change(2, 200, "d"), change(2, 90, "u")], state)
    assert p.closes == []
    assert [(r["user_id"], r[VALID_FROM], r[VALID_TO], r[IS_CURRENT]) for r in p.inserts] == [
        (1, t(10), t(10), False),
        (2, t(200), t(200), False),
    ]
    assert (p.delete_markers, p.stale) == (2, 1)


def test_a_delete_before_its_insert_keeps_the_older_insert_out() -> None:
    first = plan([change(1, 500, "d")])
    (marker,) = first.inserts
    state = {(1,): KeyState(has_current=False, last_time=marker[VALID_TO])}
    assert plan([change(1, 300, "c")], state).inserts == []


def test_a_change_older_than_a_delete_does_not_resurrect_the_key() -> None:
    # the key was closed at 300 by a delete; an update from 250 arrives late
    state = {(1,): KeyState(has_current=False, last_time=t(300))}
    assert plan([change(1, 250, "u")], state).inserts == []


def test_non_time_sequence_orders_and_takes_the_time_from_the_source() -> None:
    rows = [
        {"user_id": 1, "city": "a", "lsn": 11, "_source_ts_ms": 5000},
        {"user_id": 1, "city": "b", "lsn": 9, "_source_ts_ms": 4000},
    ]
    p = plan_scd2(
        rows,
        {(1,): KeyState(has_current=True, last_sequence=10)},
        keys=["user_id"],
        sequence_by="lsn",
        time_of=change_time("lsn", pa.int64(), NOW),
        time_ordered=time_like("lsn", pa.int64()),
        stored=["user_id", "city"],
    )
    assert p.stale == 1
    assert p.closes == [{"user_id": 1, VALID_TO: t(5000)}]
    assert [(r["city"], r[VALID_FROM]) for r in p.inserts] == [("a", t(5000))]


def test_time_rules() -> None:
    assert time_like("_source_ts_ms", pa.int64())
    assert time_like("updated_at", pa.timestamp("us", tz="UTC"))
    assert time_like("day", pa.date32())
    assert not time_like("lsn", pa.int64())
    assert not time_like("version_ms", pa.string())
    fallback = change_time("lsn", pa.int64(), NOW)
    kafka_ts = dt.datetime(2024, 5, 1, tzinfo=UTC)
    assert fallback({"lsn": 1, "_source_ts_ms": 1000, "_timestamp": kafka_ts}) == t(1000)
    assert fallback({"lsn": 1, "_timestamp": kafka_ts}) == kafka_ts
    assert fallback({"lsn": 1}) == NOW
    assert change_time("day", pa.date32(), NOW)({"day": dt.date(2024, 2, 3)}) == dt.datetime(
        2024, 2, 3, tzinfo=UTC
    )


# -- property: any arrival order, any batching -------------------------------------------

events = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from(["c", "u", "d"])), min_size=1, max_size=25
)


def _state(table: list[dict]) -> dict:
    state: dict = {}
    for row in table:
        s = state.setdefault((row["user_id"],), KeyState())
        s.has_current = s.has_current or row[IS_CURRENT]
        for x in (row[VALID_FROM], row[VALID_TO]):
            if x is not None and (s.last_time is None or x > s.last_time):
                s.last_time = x
        if s.last_sequence is None or row["lsn"] > s.last_sequence:
            s.last_sequence = row["lsn"]
    return state


def _apply(table: list[dict], p) -> None:
    for close in p.closes:
        (row,) = [r for r in table if r["user_id"] == close["user_id"] and r[IS_CURRENT]]
        row[VALID_TO], row[IS_CURRENT] = close[VALID_TO], False
    table.extend(dict(r) for r in p.inserts)


@settings(max_examples=60, deadline=None)
@given(events=events, seq=st.sampled_from(["_source_ts_ms", "lsn"]), data=st.data())
def test_any_order_and_batching_ends_with_the_newest_change_per_key(events, seq, data) -> None:
    """Whatever the arrival order and batching, and whether the sequence is a time or not."""
    changes = [
        change(uid, 100 * (i + 1), op, f"c{i}", offset=i) for i, (uid, op) in enumerate(events)
    ]
    arrival = data.draw(st.permutations(changes))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(arrival)), max_size=4)))
    batches = [arrival[a:b] for a, b in zip([0, *cuts], [*cuts, len(arrival)], strict=True)]
    table: list[dict] = []
    for batch in batches:
        _apply(table, plan(batch, _state(table), seq=seq, stored=("user_id", "city", "lsn")))
    for uid in {c["user_id"] for c in changes}:
        newest = max((c for c in changes if c["user_id"] == uid), key=lambda c: c["_source_ts_ms"])
        current = [r for r in table if r["user_id"] == uid and r[IS_CURRENT]]
        if newest["_op"] == "d":
            assert current == []
        else:
            assert [(r["city"], r[VALID_FROM]) for r in current] == [
                (newest["city"], t(newest["_source_ts_ms"]))
            ]
        history = sorted((r for r in table if r["user_id"] == uid), key=lambda r: r[VALID_FROM])
        for a, b in zip(history, history[1:], strict=False):
            assert a[VALID_TO] is not None and a[VALID_FROM] <= a[VALID_TO] <= b[VALID_FROM]
