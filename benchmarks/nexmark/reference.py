"""Nexmark's queries in DuckDB over the generator's events: the batch reference the
project's tables are checked against, computed without Spark, Kafka or Delta.

The SQL follows the published queries (Flink's and RisingWave's), in DuckDB's dialect.
Windows are half-open `[start, start + 10 s)` as Spark's `window()` assigns them, through
`time_bucket`; the published q7 joins on `BETWEEN window_end - 10 s AND window_end`, which
also lets a bid at the very instant a window ends count as that window's top when it ties
its maximum, a difference of boundary only.

`QUERIES` maps each table of the project to its SQL; `compute(folder)` runs them over the
generator's `write_ndjson` files and returns each table's rows as sorted tuples in the
columns of `COLUMNS`.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

SCHEMAS = {
    "person": {
        "id": "BIGINT",
        "name": "VARCHAR",
        "email_address": "VARCHAR",
        "credit_card": "VARCHAR",
        "city": "VARCHAR",
        "state": "VARCHAR",
        "date_time": "TIMESTAMP",
        "extra": "VARCHAR",
    },
    "auction": {
        "id": "BIGINT",
        "item_name": "VARCHAR",
        "description": "VARCHAR",
        "initial_bid": "BIGINT",
        "reserve": "BIGINT",
        "date_time": "TIMESTAMP",
        "expires": "TIMESTAMP",
        "seller": "BIGINT",
        "category": "BIGINT",
        "extra": "VARCHAR",
    },
    "bid": {
        "auction": "BIGINT",
        "bidder": "BIGINT",
        "price": "BIGINT",
        "channel": "VARCHAR",
        "url": "VARCHAR",
        "date_time": "TIMESTAMP",
        "extra": "VARCHAR",
    },
}

QUERIES = {
    "q0": "SELECT auction, bidder, price, date_time, extra FROM bid",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": """
        SELECT p.name, p.city, p.state, a.id
        FROM auction a JOIN person p ON a.seller = p.id
        WHERE a.category = 10 AND (p.state = 'OR' OR p.state = 'ID' OR p.state = 'CA')""",
    "q4": """
        SELECT q.category, avg(q.final) AS avg_final
        FROM (
          SELECT max(b.price) AS final, a.category
          FROM auction a, bid b
          WHERE a.id = b.auction AND b.date_time BETWEEN a.date_time AND a.expires
          GROUP BY a.id, a.category
        ) q
        GROUP BY q.category""",
    "q5": """
        WITH hops AS (
          SELECT auction,
                 time_bucket(INTERVAL 2 SECOND, date_time) - k * INTERVAL 2 SECOND AS starttime
          FROM bid, range(5) AS r(k)
        ),
        counts AS (SELECT starttime, auction, count(*) AS num FROM hops GROUP BY ALL)
        SELECT c.starttime, c.auction, c.num
        FROM counts c
        JOIN (SELECT starttime, max(num) AS maxn FROM counts GROUP BY ALL) m
          ON c.starttime = m.starttime AND c.num >= m.maxn""",
    "q7": """
        SELECT w.starttime, b.auction, b.bidder, b.price, b.date_time, b.extra
        FROM (SELECT *, time_bucket(INTERVAL 10 SECOND, date_time) AS starttime FROM bid) b
        JOIN (
          SELECT time_bucket(INTERVAL 10 SECOND, date_time) AS starttime, max(price) AS maxprice
          FROM bid GROUP BY 1
        ) w ON b.starttime = w.starttime AND b.price = w.maxprice""",
    "q8": """
        SELECT p.id, p.name, p.starttime
        FROM (
          SELECT id, name, time_bucket(INTERVAL 10 SECOND, date_time) AS starttime FROM person
        ) p
        JOIN (
          SELECT DISTINCT seller, time_bucket(INTERVAL 10 SECOND, date_time) AS starttime
          FROM auction
        ) a ON p.id = a.seller AND p.starttime = a.starttime""",
}

COLUMNS = {
    "q0": ["auction", "bidder", "price", "date_time", "extra"],
    "q1": ["auction", "bidder", "price", "date_time", "extra"],
    "q2": ["auction", "price"],
    "q3": ["name", "city", "state", "id"],
    "q4": ["category", "avg_final"],
    "q5": ["window_start", "auction", "num"],
    "q7": ["window_start", "auction", "bidder", "price", "date_time", "extra"],
    "q8": ["id", "name", "starttime"],
}
"""Each table's columns in the order the rows' tuples hold them (q7's project table holds
one row per window with its top bids in an array, q5's with its hot auctions; `flatten`
unnests them)."""


def normal(v: Any) -> Any:
    """Values as both sides compare them: timestamps naive UTC, decimals exact."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(v, float):
        return v
    if isinstance(v, Decimal):
        return v.normalize()
    return v


def rows(records: list[tuple]) -> list[tuple]:
    return sorted((tuple(normal(v) for v in r) for r in records), key=repr)


def compute(folder: Path) -> dict[str, list[tuple]]:
    """Every query's rows over `<folder>/{person,auction,bid}.json`, sorted."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        for kind, columns in SCHEMAS.items():
            cols = ", ".join(f"'{c}': '{t}'" for c, t in columns.items())
            con.execute(
                f"CREATE TABLE {kind} AS SELECT * FROM read_json("
                f"'{folder / f'{kind}.json'}', format = 'newline_delimited', "
                f"columns = {{{cols}}}, timestampformat = '%Y-%m-%dT%H:%M:%S.%gZ')"
            )
        return {name: rows(con.execute(sql).fetchall()) for name, sql in QUERIES.items()}
    finally:
        con.close()


def project_rows(name: str, table: list[dict[str, Any]]) -> list[tuple]:
    """The rows of the project's table `name` as the reference's: q5's and q7's one row a
    window unnested (q5's hot `auctions`, q7's top `bids`), the others' `COLUMNS`."""
    if name == "q5":
        flat = [(w["window_start"], a, w["num"]) for w in table for a in w["auctions"]]
    elif name == "q7":
        flat = [
            (w["window_start"], b["auction"], b["bidder"], b["price"], b["date_time"], b["extra"])
            for w in table
            for b in w["bids"]
        ]
    else:
        flat = [tuple(r[c] for c in COLUMNS[name]) for r in table]
    return rows(flat)
