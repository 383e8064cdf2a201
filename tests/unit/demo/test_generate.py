"""The example's generator: deterministic, and the data has the properties the demo shows."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest

from warehouse.demo.continuous import split_timeline
from warehouse.demo.run import render_table
from warehouse.generate import DEFAULT_START, TOPICS, ShopGenerator, generate


@pytest.fixture(scope="module")
def records():
    return generate(3000, seed=7)


def test_same_seed_same_bytes_other_seed_other_data(records) -> None:
    again = generate(3000, seed=7)
    assert [(r.topic, r.key, r.value) for r in again] == [
        (r.topic, r.key, r.value) for r in records
    ]
    other = generate(3000, seed=8)
    assert [r.value for r in other] != [r.value for r in records]


def test_records_arrive_in_time_order_on_the_example_topics(records) -> None:
    assert [r.at for r in records] == sorted(r.at for r in records)
    assert {r.topic for r in records} == set(TOPICS)


def test_users_and_products_are_skewed(records) -> None:
    orders = [json.loads(r.value) for r in records if r.kind == "order" and not r.duplicate]
    by_user = Counter(o["user_id"] for o in orders).most_common()
    by_product = Counter(o["product_id"] for o in orders).most_common()
    # the busiest user and product take far more than an even share
    assert by_user[0][1] > 5 * len(orders) / len(by_user)
    assert by_product[0][1] > 3 * len(orders) / len(by_product)


def test_late_out_of_order_duplicate_and_malformed_records_are_present(records) -> None:
    facts = [r for r in records if r.kind in ("order", "payment", "page_view")]
    lag = []
    for r in facts:
        event = dt.datetime.fromisoformat(json.loads(r.value)["event_time"])
        lag.append((DEFAULT_START + dt.timedelta(seconds=r.at) - event).total_seconds())
    assert sum(1 for s in lag if s > 600) >= 10  # later than the 10-minute watermarks
    times = [json.loads(r.value)["event_time"] for r in facts if r.topic == "orders"]
    assert any(a > b for a, b in zip(times, times[1:], strict=False))  # out of order
    dupes = [r for r in records if r.duplicate]
    originals = {(r.topic, r.key, r.value) for r in records if not r.duplicate}
    assert dupes and all((r.topic, r.key, r.value) in originals for r in dupes)
    malformed = Counter(r.topic for r in records if r.kind == "malformed")
    assert set(malformed) == {"orders", "payments", "page_views"}


def test_cdc_has_snapshot_inserts_updates_deletes_and_tombstones(records) -> None:
    ops = Counter()
    for r in records:
        if r.topic.startswith("shop."):
            if r.value is None:
                ops[(r.topic, "tombstone")] += 1
            else:
                ops[(r.topic, json.loads(r.value)["op"])] += 1
    for topic in ("shop.users", "shop.products"):
        for op in ("r", "c", "u", "d", "tombstone"):
            assert ops[(topic, op)] > 0, (topic, op, ops)
    # per key, changes are in source-time order (as Debezium delivers them)
    last: dict[bytes, int] = {}
    for r in records:
        if r.topic.startswith("shop.") and r.value is not None:
            ts = json.loads(r.value)["source"]["ts_ms"]
            assert ts >= last.get(r.key, 0)
            last[r.key] = ts


def test_the_endless_timeline_splits_where_asked() -> None:
    gen = ShopGenerator(seed=3, seconds_per_event=0.5)
    head, rest = split_timeline(gen.records(), 10.0)
    assert head and all(r.at <= 10.0 for r in head)
    following = [next(rest) for _ in range(5)]
    assert all(r.at > 10.0 for r in following)
    assert [r.at for r in following] == sorted(r.at for r in following)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="events must be >= 0"):
        generate(-1)
    with pytest.raises(ValueError, match="seconds_per_event must be > 0"):
        ShopGenerator(seconds_per_event=0)


def test_render_table_aligns_numbers_and_limits_rows() -> None:
    rows = [
        {"city": "Berlin", "orders": 12, "_hidden": 1},
        {"city": "Oslo", "orders": 3, "_hidden": 2},
    ]
    text = render_table("board", rows, limit=1)
    assert text.splitlines() == [
        "board (first 1 of 2)",
        "city    orders",
        "------  ------",
        "Berlin      12",
    ]
