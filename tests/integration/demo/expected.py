"""What the example warehouse must hold, computed in plain Python from the raw records.

Independent of Spark and of the warehouse code: it reads the generator's records as
bytes (what went to Kafka) and applies the example's rules as the YAML files state
them. It does not use the generator's labels (`Record.kind`) to decide what is
malformed; the test checks those agree separately.

Watermarks: the demo runs each table once (Trigger.AvailableNow) on a fresh
checkpoint, so every table's input arrives in its first micro-batch. Spark drops a
row as late only against the watermark of an *earlier* batch, which the first batch
does not have, and the DWS aggregates write in update mode (a window's row appears as
soon as it has data, not when the watermark closes it). So nothing is dropped as late
here and no "flush" event is needed; late and out-of-order records count like the
others. (Dropping late data is exercised by the continuous mode, not compared here.)
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

PAY_WITHIN = dt.timedelta(minutes=15)
CENT = Decimal("0.01")


def _object(value: bytes | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        obj = json.loads(value)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value).astimezone(dt.UTC)
    except ValueError:
        return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _money(value: float) -> Decimal:
    return Decimal(repr(float(value))).quantize(CENT, rounding=ROUND_HALF_UP)


def _minute(t: dt.datetime) -> dt.datetime:
    return t.replace(second=0, microsecond=0)


@dataclass
class Expected:
    quarantined: dict[str, int] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    payments: dict[str, dict[str, Any]] = field(default_factory=dict)
    city_gmv_1m: dict[tuple[dt.datetime, str], tuple[Decimal, int]] = field(default_factory=dict)
    active_users_5m: dict[dt.datetime, int] = field(default_factory=dict)
    order_payments: list[tuple[str, str]] = field(default_factory=list)
    leaderboard: dict[str, tuple[Decimal, int]] = field(default_factory=dict)
    conversion: dict[str, tuple[int, int, Decimal, float]] = field(default_factory=dict)


def _valid_fact(obj: dict[str, Any] | None, id_field: str, numbers: tuple[str, ...]) -> bool:
    """Parses against its schema and passes the ODS not-null expectations."""
    if obj is None or obj.get(id_field) is None or _time(obj.get("event_time")) is None:
        return False
    return all(obj.get(n) is None or _number(obj[n]) for n in numbers)


def _apply_cdc(records: list[tuple[int, dict[str, Any]]], key: str) -> dict[str, dict[str, Any]]:
    """Latest row image per key by the change's source time; deletes remove the key."""
    state: dict[str, dict[str, Any]] = {}
    latest: dict[str, int] = {}
    for ts, change in sorted(records, key=lambda r: r[0]):
        image = change["before"] if change["op"] == "d" else change["after"]
        k = image[key]
        if ts <= latest.get(k, -1):
            continue  # stale or repeated change
        latest[k] = ts
        if change["op"] == "d":
            state.pop(k, None)
        else:
            state[k] = image
    return state


def compute(records: Iterable[Any]) -> Expected:  # noqa: C901  # one branch per topic and kind
    """`records`: objects with `topic`, `value` (bytes or None), in production order."""
    exp = Expected()
    quarantined: dict[str, int] = defaultdict(int)
    cdc: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    orders: dict[str, dict[str, Any]] = {}
    payments: dict[str, dict[str, Any]] = {}
    views: list[dict[str, Any]] = []
    for rec in records:
        obj = _object(rec.value)
        if rec.topic in ("shop.users", "shop.products"):
            if rec.value is not None:  # tombstones are skipped
                cdc[rec.topic].append((obj["source"]["ts_ms"], obj))
        elif rec.topic == "orders":
            if not _valid_fact(obj, "order_id", ("amount", "quantity")):
                quarantined["ods_orders"] += 1
            else:
                orders.setdefault(obj["order_id"], obj)
        elif rec.topic == "payments":
            if not _valid_fact(obj, "payment_id", ("amount",)):
                quarantined["ods_payments"] += 1
            elif obj.get("order_id") is not None:
                payments.setdefault(obj["payment_id"], obj)
        elif rec.topic == "page_views":
            if not _valid_fact(obj, "user_id", ()):
                quarantined["ods_page_views"] += 1
            else:
                views.append(obj)
    exp.quarantined = dict(quarantined)
    exp.users = _apply_cdc(cdc["shop.users"], "user_id")
    exp.products = _apply_cdc(cdc["shop.products"], "product_id")

    for oid, o in orders.items():
        user = exp.users.get(o["user_id"]) or {}
        exp.orders[oid] = {
            "order_id": oid,
            "city": user.get("city") or "unknown",
            "amount": _money(o["amount"]),
            "event_time": _time(o["event_time"]),
        }
    for pid, p in payments.items():
        exp.payments[pid] = {
            "payment_id": pid,
            "order_id": p["order_id"],
            "status": str(p["status"]).lower(),
            "event_time": _time(p["event_time"]),
        }

    gmv: dict[tuple[dt.datetime, str], list[Any]] = defaultdict(lambda: [Decimal("0.00"), 0])
    board: dict[str, list[Any]] = defaultdict(lambda: [Decimal("0.00"), 0])
    for o in exp.orders.values():
        key = (_minute(o["event_time"]), o["city"])
        gmv[key][0] += o["amount"]
        gmv[key][1] += 1
        board[o["city"]][0] += o["amount"]
        board[o["city"]][1] += 1
    exp.city_gmv_1m = {k: (v[0], v[1]) for k, v in gmv.items()}
    exp.leaderboard = {k: (v[0], v[1]) for k, v in board.items()}

    active: dict[dt.datetime, set[str]] = defaultdict(set)
    for v in views:
        t = _time(v["event_time"])
        assert t is not None
        for k in range(5):  # the 5-minute windows, one a minute, that contain t
            active[_minute(t) - dt.timedelta(minutes=k)].add(v["user_id"])
    exp.active_users_5m = {start: len(users) for start, users in active.items()}

    by_order: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in exp.payments.values():
        if p["status"] == "captured":
            by_order[p["order_id"]].append(p)
    conv: dict[str, list[Any]] = defaultdict(lambda: [0, 0, Decimal("0.00")])
    for o in exp.orders.values():
        conv[o["city"]][0] += 1
        for p in by_order.get(o["order_id"], []):
            if o["event_time"] <= p["event_time"] <= o["event_time"] + PAY_WITHIN:
                exp.order_payments.append((o["order_id"], p["payment_id"]))
                conv[o["city"]][1] += 1
                conv[o["city"]][2] += o["amount"]
    exp.order_payments.sort()
    exp.conversion = {c: (v[0], v[1], v[2], v[1] / v[0]) for c, v in conv.items()}
    return exp
