"""The example warehouse's tables and published views, checked against the independent
computation of tests/integration/demo/expected.py: shared by the tests that run the
example as a user does and then look at what it left (on Apache Kafka, under chaos)."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from streams.cdc.ktable import latest_values
from streams.delta.arrow import read_table
from tests.integration.cdc.helpers import read_records
from tests.integration.demo.expected import Expected
from warehouse.spec.paths import table_exists, table_path


def rows(root: str | Path, name: str) -> list[dict[str, Any]]:
    """The rows of table `name` under the warehouse root `root` (a path or a URI)."""
    return read_table(table_path(root, name)).to_pylist()


def ods_coordinates(root: str | Path, topic: str) -> dict[tuple[int, int], int]:
    """How often each `(partition, offset)` of `topic` is in its ODS table or quarantine."""
    seen = Counter((r["_partition"], r["_offset"]) for r in rows(root, f"ods_{topic}"))
    quarantine = f"ods_{topic}__quarantine"
    if table_exists(table_path(root, quarantine)):  # none when no record was bad
        seen.update((r["source_partition"], r["source_offset"]) for r in rows(root, quarantine))
    return dict(seen)


def assert_tables(root: str | Path, exp: Expected) -> None:
    """The example's tables under `root` equal the independent computation, row for row
    (lists, not sets: a duplicate row fails)."""
    current = sorted((r["user_id"], r["city"]) for r in rows(root, "dim_users") if r["is_current"])
    assert current == sorted((u, row["city"]) for u, row in exp.users.items())
    assert sorted((r["product_id"], r["category"]) for r in rows(root, "dim_products")) == sorted(
        (p, row["category"]) for p, row in exp.products.items()
    )
    assert sorted(
        (r["order_id"], r["city"], r["amount"]) for r in rows(root, "dwd_orders")
    ) == sorted((o["order_id"], o["city"], o["amount"]) for o in exp.orders.values())
    gmv = sorted(
        ((r["window_start"], r["city"]), (r["gmv"], r["orders"]))
        for r in rows(root, "dws_city_gmv_1m")
    )
    assert gmv == sorted(exp.city_gmv_1m.items())
    active = sorted(
        (r["window_start"], r["active_users"]) for r in rows(root, "dws_active_users_5m")
    )
    assert active == sorted(exp.active_users_5m.items())
    paid = sorted((r["order_id"], r["payment_id"]) for r in rows(root, "dws_order_payments"))
    assert paid == exp.order_payments
    board = sorted((r["city"], (r["gmv"], r["orders"])) for r in rows(root, "ads_city_leaderboard"))
    assert board == sorted(exp.leaderboard.items())
    conversion = sorted(
        (r["city"], (r["orders"], r["paid_orders"], r["paid_gmv"], r["conversion"]))
        for r in rows(root, "ads_conversion")
    )
    assert conversion == sorted(exp.conversion.items())


def assert_sources(root: str | Path, exp: Expected, ends: dict[str, dict[int, int]]) -> None:
    """What `assert_tables` leaves out: every record of each fact topic (`ends`: its end
    offset per partition) is in its ODS table or quarantine exactly once, the quarantines
    hold the malformed records, and `dwd_payments` holds each valid payment once."""
    for topic in ("orders", "payments", "page_views"):
        assert ods_coordinates(root, topic) == {
            (p, o): 1 for p, end in ends[topic].items() for o in range(end)
        }, topic
    quarantined = {
        f"ods_{t}": len(rows(root, f"ods_{t}__quarantine"))
        for t in ("orders", "payments", "page_views")
        if table_exists(table_path(root, f"ods_{t}__quarantine"))
    }
    assert {t: n for t, n in quarantined.items() if n} == exp.quarantined
    payments = sorted(
        (r["payment_id"], r["order_id"], r["status"], r["event_time"])
        for r in rows(root, "dwd_payments")
    )
    assert payments == sorted(
        (p["payment_id"], p["order_id"], p["status"], p["event_time"])
        for p in exp.payments.values()
    )


def assert_published(bootstrap: str, exp: Expected) -> None:
    """The views' compacted topics: their latest rows equal the ADS tables' expected rows,
    and no change is there twice (read_committed)."""
    board = {
        json.loads(k)["city"]: json.loads(v)
        for k, v in latest_values(bootstrap, "mv.city_leaderboard").items()
    }
    assert {c: (Decimal(v["gmv"]), v["orders"]) for c, v in board.items()} == exp.leaderboard
    conversion = {
        json.loads(k)["city"]: json.loads(v)
        for k, v in latest_values(bootstrap, "mv.conversion").items()
    }
    assert {
        c: (v["orders"], v["paid_orders"], Decimal(v["paid_gmv"]), v["conversion"])
        for c, v in conversion.items()
    } == exp.conversion
    for topic in ("mv.city_leaderboard", "mv.conversion"):
        changes = Counter((k, version) for k, _, version in read_records(bootstrap, topic))
        assert [c for c, n in changes.items() if n > 1] == [], topic
