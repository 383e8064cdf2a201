"""The demo end to end on the bundled example: a real broker process, the session's Spark,
real Delta tables; its DWS and ADS results equal a plain-Python computation over the
generator's records (tests/integration/demo/expected.py), exactly.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from streams.cdc.ktable import latest_values
from streams.delta.arrow import read_table
from tests.integration.demo.expected import compute
from warehouse import Project
from warehouse.demo import run_demo
from warehouse.generate import generate

# Twelve queries one after another: ~3 min on an idle 2-core machine, 10 on a busy one.
pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[3]
EVENTS = 1200
SEED = 11


def table(project: Project, name: str) -> list[dict[str, Any]]:
    return read_table(str(project.table_path(name))).to_pylist()


def test_demo_results_equal_an_independent_computation(
    spark, broker_factory, tmp_path: Path, engine: str
) -> None:
    broker = broker_factory()
    project = Project.load(
        REPO,
        environ={},
        warehouse_root=str(tmp_path / "wh"),
        kafka={"bootstrap": broker.bootstrap},
        engines={"kafka": engine, "delta": engine},
    )
    lines: list[str] = []
    result = run_demo(
        project, spark, bootstrap=broker.bootstrap, events=EVENTS, seed=SEED, out=lines.append
    )
    text = "\n".join(lines)
    records = generate(EVENTS, seed=SEED)
    exp = compute(records)

    # The generator's malformed records are exactly what the ODS tables quarantined.
    malformed = Counter(f"ods_{r.topic}" for r in records if r.kind == "malformed")
    assert exp.quarantined == dict(malformed)
    assert {t: n for t, n in result.quarantined.items() if n} == exp.quarantined
    assert all(r.skipped is None for r in result.results), text
    assert result.exit_code == 0, text

    dim_users = table(project, "dim_users")
    current = {r["user_id"]: r["city"] for r in dim_users if r["is_current"]}
    assert current == {u: row["city"] for u, row in exp.users.items()}
    assert {r["product_id"]: r["category"] for r in table(project, "dim_products")} == {
        p: row["category"] for p, row in exp.products.items()
    }
    assert sorted(
        (r["order_id"], r["city"], r["amount"]) for r in table(project, "dwd_orders")
    ) == sorted((o["order_id"], o["city"], o["amount"]) for o in exp.orders.values())

    gmv = {
        (r["window_start"], r["city"]): (r["gmv"], r["orders"])
        for r in table(project, "dws_city_gmv_1m")
    }
    assert gmv == exp.city_gmv_1m
    active = {r["window_start"]: r["active_users"] for r in table(project, "dws_active_users_5m")}
    assert active == exp.active_users_5m
    paid = sorted((r["order_id"], r["payment_id"]) for r in table(project, "dws_order_payments"))
    assert paid == exp.order_payments

    board = {r["city"]: (r["gmv"], r["orders"]) for r in table(project, "ads_city_leaderboard")}
    assert board == exp.leaderboard
    conversion = {
        r["city"]: (r["orders"], r["paid_orders"], r["paid_gmv"], r["conversion"])
        for r in table(project, "ads_conversion")
    }
    assert conversion == exp.conversion

    # The materialized views on their compacted topics hold the same rows.
    published = {
        json.loads(k)["city"]: json.loads(v)
        for k, v in latest_values(broker.bootstrap, "mv.city_leaderboard").items()
    }
    assert {c: (Decimal(v["gmv"]), v["orders"]) for c, v in published.items()} == exp.leaderboard
    published = {
        json.loads(k)["city"]: json.loads(v)
        for k, v in latest_values(broker.bootstrap, "mv.conversion").items()
    }
    assert {
        c: (v["orders"], v["paid_orders"], Decimal(v["paid_gmv"]), v["conversion"])
        for c, v in published.items()
    } == exp.conversion

    # What the user sees: both ADS tables and the summary.
    assert "ads_city_leaderboard" in text and "ads_conversion" in text
    assert "time per layer: ods" in text and "run side by side" in text
    assert f"published: mv.city_leaderboard holds {len(exp.leaderboard)} keys" in text
