"""A seeded, deterministic shop: the event streams of the bundled example warehouse.

`ShopGenerator(seed=..., start=..., seconds_per_event=...).records()` yields the
records of an endless shop day in arrival order; `generate(events, ...)` takes the
first `events` business events (orders, page views, user and product changes) and
everything they cause (payments, redeliveries, malformed copies), then stops.

What makes the data realistic (and worth a warehouse):
- skewed users, products and cities (Zipf-like weights);
- late, out-of-order arrivals: some events reach Kafka minutes after their event
  time, behind newer ones;
- duplicates: some records are delivered twice (same key and value);
- malformed records: invalid JSON, a wrong type, a missing id (beside the real one);
- CDC: the `users` and `products` tables as Debezium change events: a snapshot
  (`r`), inserts, updates and deletes followed by a tombstone, in order per key.

The same seed and start give byte-identical records; no clock or global random
state is read.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

DEFAULT_START = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
"""Event time of the first event when none is given (fixed, for reproducible output)."""

TOPICS: dict[str, int] = {
    "orders": 2,
    "payments": 2,
    "page_views": 2,
    "shop.users": 1,
    "shop.products": 1,
}
"""Source topics of the example and their partition counts."""

CITIES: tuple[tuple[str, float], ...] = (
    ("Berlin", 30),
    ("Paris", 20),
    ("Madrid", 15),
    ("Rome", 10),
    ("Vienna", 8),
    ("Lisbon", 7),
    ("Prague", 5),
    ("Oslo", 5),
)
CATEGORIES = ("books", "games", "garden", "kitchen", "music", "toys")
PAGES = ("home", "search", "product", "cart", "checkout", "account")
METHODS = ("card", "paypal", "sepa")
TIERS = ("basic", "plus", "vip")

Kind = Literal["order", "payment", "page_view", "user", "product", "tombstone", "malformed"]


@dataclass(frozen=True, order=True)
class Record:
    """One Kafka record: produce it to `topic` at `at` seconds after the start."""

    at: float
    seq: int
    topic: str = field(compare=False)
    key: bytes | None = field(compare=False)
    value: bytes | None = field(compare=False)
    kind: Kind = field(compare=False)
    duplicate: bool = field(default=False, compare=False)


def iso(t: dt.datetime) -> str:
    """Event times as Kafka payloads carry them: ISO 8601, milliseconds, `Z`."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _zipf(n: int, s: float) -> list[float]:
    return [1.0 / (i + 1) ** s for i in range(n)]


class ShopGenerator:
    """An endless, deterministic stream of shop records.

    Not thread-safe: one consumer iterates `records()`.
    """

    def __init__(
        self,
        *,
        seed: int = 7,
        start: dt.datetime = DEFAULT_START,
        seconds_per_event: float = 0.6,
        users: int = 200,
        products: int = 40,
    ) -> None:
        if seconds_per_event <= 0:
            raise ValueError(f"seconds_per_event must be > 0, got `{seconds_per_event}`")
        self.rng = random.Random(seed)
        self.start = start
        self.gap = seconds_per_event
        self.users: dict[str, dict[str, Any]] = {}
        self.products: dict[str, dict[str, Any]] = {}
        self.user_ids: list[str] = []
        self.user_weights: list[float] = []
        self.product_ids: list[str] = []
        self.product_weights: list[float] = []
        self._pending: list[Record] = []
        self._seq = 0
        self._orders = 0
        self._payments = 0
        self._views = 0
        self._n_users = users
        self._n_products = products
        self.business_events = 0

    # -- helpers ---------------------------------------------------------------

    def _time(self, at: float) -> dt.datetime:
        return self.start + dt.timedelta(milliseconds=round(at * 1000))

    def _push(
        self,
        at: float,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        kind: Kind,
        *,
        duplicate: bool = False,
    ) -> None:
        self._seq += 1
        heapq.heappush(
            self._pending, Record(max(at, 0.0), self._seq, topic, key, value, kind, duplicate)
        )

    def _fact(self, at: float, topic: str, key: str, payload: dict[str, Any], kind: Kind) -> None:
        """A fact record, sometimes delivered twice and sometimes followed by a malformed one."""
        value = _dumps(payload)
        self._push(at, topic, key.encode(), value, kind)
        r = self.rng.random()
        if r < 0.03:
            self._push(
                at + self.rng.uniform(1, 30), topic, key.encode(), value, kind, duplicate=True
            )
        elif r < 0.04:
            self._push(
                at + self.rng.uniform(0, 5),
                topic,
                key.encode(),
                self._malformed(payload),
                "malformed",
            )

    def _malformed(self, payload: dict[str, Any]) -> bytes:
        """A broken copy of `payload`; every kind is quarantined by `ods_*`."""
        choice = self.rng.randrange(4)
        if choice == 0:
            return _dumps(payload)[:-7]  # cut off: invalid JSON
        if choice == 1:
            if "amount" in payload:
                return _dumps(dict(payload, amount="12,50 EUR"))  # a string for a number
            return _dumps(dict(payload, event_time="yesterday-ish"))  # not a timestamp
        if choice == 2:
            return _dumps(dict(payload, event_time=None))  # no event time
        return _dumps([payload])  # not an object

    def _cdc(
        self,
        at: float,
        table: str,
        key_name: str,
        key: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        op: str,
    ) -> None:
        t_ms = int(self._time(at).timestamp() * 1000)
        value = {
            "before": before,
            "after": after,
            "op": op,
            "ts_ms": t_ms + 5,
            "source": {"db": "shop", "table": table, "ts_ms": t_ms},
        }
        key_bytes = _dumps({key_name: key})
        topic = f"shop.{table}"
        kind: Kind = "user" if table == "users" else "product"
        self._push(at, topic, key_bytes, _dumps(value), kind)
        if op == "d":
            self._push(at, topic, key_bytes, None, "tombstone")

    # -- dimensions ------------------------------------------------------------

    def _new_user(self, at: float, op: str) -> None:
        uid = f"u{len(self.user_ids) + 1:04d}"
        city = self.rng.choices([c for c, _ in CITIES], [w for _, w in CITIES])[0]
        row = {
            "user_id": uid,
            "name": f"user {len(self.user_ids) + 1}",
            "city": city,
            "tier": self.rng.choices(TIERS, [70, 25, 5])[0],
            "signup_date": (self._time(at) - dt.timedelta(days=self.rng.randrange(1, 900)))
            .date()
            .isoformat(),
        }
        self.users[uid] = row
        self.user_ids.append(uid)
        self.user_weights = _zipf(len(self.user_ids), 1.1)
        self._cdc(at, "users", "user_id", uid, None, row, op)

    def _new_product(self, at: float, op: str) -> None:
        pid = f"p{len(self.product_ids) + 1:03d}"
        row = {
            "product_id": pid,
            "name": f"product {len(self.product_ids) + 1}",
            "category": self.rng.choice(CATEGORIES),
            "price": self.rng.randrange(299, 19999) / 100,
        }
        self.products[pid] = row
        self.product_ids.append(pid)
        self.product_weights = _zipf(len(self.product_ids), 1.2)
        self._cdc(at, "products", "product_id", pid, None, row, op)

    def _snapshot(self) -> None:
        for _ in range(self._n_users):
            self._new_user(0.0, "r")
        for _ in range(self._n_products):
            self._new_product(0.0, "r")

    def _user_change(self, at: float) -> None:
        r = self.rng.random()
        live = [u for u in self.user_ids if u in self.users]
        if r < 0.2 or not live:
            self._new_user(at, "c")
            return
        uid = self.rng.choice(live)
        before = self.users[uid]
        if r < 0.28:
            del self.users[uid]
            self._cdc(at, "users", "user_id", uid, before, None, "d")
            return
        after = dict(before)
        if self.rng.random() < 0.6:
            after["city"] = self.rng.choices([c for c, _ in CITIES], [w for _, w in CITIES])[0]
        else:
            after["tier"] = self.rng.choice(TIERS)
        self.users[uid] = after
        self._cdc(at, "users", "user_id", uid, before, after, "u")

    def _product_change(self, at: float) -> None:
        r = self.rng.random()
        live = [p for p in self.product_ids if p in self.products]
        if r < 0.1 or not live:
            self._new_product(at, "c")
            return
        pid = self.rng.choice(live)
        before = self.products[pid]
        if r < 0.15:
            del self.products[pid]
            self._cdc(at, "products", "product_id", pid, before, None, "d")
            return
        after = dict(before)
        if r < 0.9:
            after["price"] = round(before["price"] * self.rng.uniform(0.8, 1.2), 2)
        else:
            after["category"] = self.rng.choice(CATEGORIES)
        self.products[pid] = after
        self._cdc(at, "products", "product_id", pid, before, after, "u")

    # -- facts -----------------------------------------------------------------

    def _lateness(self) -> float:
        """Seconds between an event's time and its arrival: mostly none, sometimes minutes."""
        r = self.rng.random()
        if r < 0.05:
            return self.rng.uniform(60, 900)
        if r < 0.25:
            return self.rng.uniform(0, 3)
        return 0.0

    def _order(self, t: float) -> None:
        self._orders += 1
        oid = f"o{self._orders:06d}"
        uid = self.rng.choices(self.user_ids, self.user_weights)[0]
        pid = self.rng.choices(self.product_ids, self.product_weights)[0]
        product = self.products.get(pid) or {"price": 9.99}
        qty = self.rng.choices((1, 2, 3), (70, 20, 10))[0]
        amount = round(product["price"] * qty, 2)
        order = {
            "order_id": oid,
            "user_id": uid,
            "product_id": pid,
            "quantity": qty,
            "amount": amount,
            "currency": "EUR",
            "event_time": iso(self._time(t)),
        }
        self._fact(t + self._lateness(), "orders", oid, order, "order")
        if self.rng.random() < 0.8:
            self._payments_for(t, oid, amount)

    def _payments_for(self, t: float, oid: str, amount: float) -> None:
        method = self.rng.choice(METHODS)
        pay_at = t + (
            self.rng.uniform(960, 1500) if self.rng.random() < 0.07 else self.rng.uniform(5, 300)
        )
        if self.rng.random() < 0.08:
            fail_at = t + self.rng.uniform(2, max(3.0, pay_at - t - 1))
            self._payment(fail_at, oid, amount, method, "failed")
        self._payment(pay_at, oid, amount, method, "captured")

    def _payment(self, t: float, oid: str, amount: float, method: str, status: str) -> None:
        self._payments += 1
        payment = {
            "payment_id": f"pay{self._payments:06d}",
            "order_id": oid,
            "amount": amount,
            "method": method,
            "status": status,
            "event_time": iso(self._time(t)),
        }
        self._fact(t + self._lateness(), "payments", oid, payment, "payment")

    def _page_view(self, t: float) -> None:
        self._views += 1
        uid = self.rng.choices(self.user_ids, self.user_weights)[0]
        page = self.rng.choices(PAGES, (20, 25, 30, 10, 5, 10))[0]
        view = {
            "view_id": f"v{self._views:07d}",
            "user_id": uid,
            "session_id": f"s-{uid}-{int(t // 1800)}",
            "page": page,
            "product_id": self.rng.choices(self.product_ids, self.product_weights)[0]
            if page == "product"
            else None,
            "event_time": iso(self._time(t)),
        }
        self._fact(t + self._lateness(), "page_views", uid, view, "page_view")

    # -- the stream ------------------------------------------------------------

    def _event(self, t: float) -> None:
        r = self.rng.random()
        if r < 0.55:
            self._page_view(t)
        elif r < 0.88:
            self._order(t)
        elif r < 0.95:
            self._user_change(t)
        else:
            self._product_change(t)
        self.business_events += 1

    def records(self, events: int | None = None) -> Iterator[Record]:
        """Records in arrival order; with `events`, stop after that many business events
        and whatever they still cause (payments, late and repeated deliveries)."""
        self._snapshot()
        n = 0
        while events is None or n < events:
            t = (n + 1) * self.gap
            self._event(t)
            n += 1
            while self._pending and self._pending[0].at <= t:
                yield heapq.heappop(self._pending)
        while self._pending:
            yield heapq.heappop(self._pending)


def generate(
    events: int,
    *,
    seed: int = 7,
    start: dt.datetime = DEFAULT_START,
    seconds_per_event: float = 0.6,
    users: int | None = None,
    products: int | None = None,
) -> list[Record]:
    """The records of `events` business events, in arrival order (deterministic)."""
    if events < 0:
        raise ValueError(f"events must be >= 0, got `{events}`")
    gen = ShopGenerator(
        seed=seed,
        start=start,
        seconds_per_event=seconds_per_event,
        users=users if users is not None else max(20, min(2000, events // 15)),
        products=products if products is not None else max(10, min(500, events // 75)),
    )
    return list(gen.records(events))
