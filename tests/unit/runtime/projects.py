"""A small two-layer project written into a folder, for the runtime and CLI tests.

`ods_orders` lands a Kafka topic (JSON, schema `orders`; a null `order_id` is
quarantined); `dwd_orders` types and deduplicates it by `order_id`.
"""

from __future__ import annotations

import json
from pathlib import Path

ORDERS_SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "user_id": {"type": "string"},
        "amount": {"type": "number"},
        "event_time": {"type": "string", "format": "date-time"},
    },
    "required": ["event_time"],
}

DWD_SQL = """\
SELECT order_id, user_id, CAST(amount AS DECIMAL(12,2)) AS amount, event_time
FROM source
WHERE amount >= 0
"""


def write_project(
    root: Path,
    *,
    topic: str = "orders",
    bootstrap: str = "embedded",
    warehouse_root: Path | None = None,
    dwd: bool = True,
    extra_conf: str = "",
    engine: str = "auto",
) -> Path:
    """Write the project into `root` and return it; `engine` for both Kafka and Delta."""
    wroot = warehouse_root or root / ".warehouse"
    (root / "conf").mkdir(parents=True, exist_ok=True)
    (root / "schemas").mkdir(exist_ok=True)
    (root / "layers" / "ods").mkdir(parents=True, exist_ok=True)
    (root / "conf" / "local.yml").write_text(
        f"""\
warehouse_root: {wroot}
kafka:
  bootstrap: "{bootstrap}"
  embedded: {{host: 127.0.0.1, port: 0}}
engines: {{kafka: {engine}, delta: {engine}}}
spark:
  master: "local[2]"
  conf:
    spark.sql.shuffle.partitions: "2"
    spark.default.parallelism: "2"
    spark.ui.enabled: "false"
{extra_conf}"""
    )
    (root / "schemas" / "orders.json").write_text(json.dumps(ORDERS_SCHEMA, indent=2))
    (root / "layers" / "ods" / "orders.yml").write_text(
        f"""\
table: ods_orders
source:
  kafka: {{topic: {topic}, starting_offsets: earliest, format: json, schema: orders}}
sink: {{mode: append}}
expectations:
  - expect_column_values_to_not_be_null: {{column: order_id}}
    on_violation: quarantine
"""
    )
    if dwd:
        (root / "layers" / "dwd").mkdir(parents=True, exist_ok=True)
        (root / "layers" / "dwd" / "orders.yml").write_text(
            "table: dwd_orders\n"
            "source: {table: ods_orders}\n"
            "transform:\n  sql: |\n"
            + "".join(f"    {line}\n" for line in DWD_SQL.splitlines())
            + "watermark: {column: event_time, delay: 1 hour}\n"
            "dedupe: {keys: [order_id]}\n"
            "sink: {mode: append}\n"
        )
    return root


USERS_SCHEMA = {
    "type": "object",
    "properties": {"user_id": {"type": "string"}, "city": {"type": "string"}},
    "required": ["user_id"],
}

DWS_SQL = """\
SELECT o.order_id, o.amount, o.event_time, u.city
FROM source o JOIN dim_users u ON o.user_id = u.user_id
"""


def write_dws_project(root: Path, *, publish_topic: str | None = None, **kwargs: object) -> Path:
    """The two-layer project plus `dim_users` (CDC upsert) and `dws_city_1m`: a one-minute
    tumbling window of `dwd_orders` joined with the `dim_users` snapshot, upserted by key
    (and published to `publish_topic` when given)."""
    write_project(root, **kwargs)  # type: ignore[arg-type]
    (root / "schemas" / "users.json").write_text(json.dumps(USERS_SCHEMA, indent=2))
    (root / "layers" / "dwd" / "users.yml").write_text(
        "table: dim_users\n"
        "source:\n  kafka: {topic: users, format: upsert-json, schema: users}\n"
        "sink: {mode: upsert, keys: [user_id]}\n"
    )
    (root / "layers" / "dws").mkdir(parents=True, exist_ok=True)
    (root / "layers" / "dws" / "city_1m.yml").write_text(
        "table: dws_city_1m\n"
        "source: {table: dwd_orders}\n"
        "transform:\n  sql: |\n"
        + "".join(f"    {line}\n" for line in DWS_SQL.splitlines())
        + "watermark: {column: event_time, delay: 1 hour}\n"
        "aggregate:\n"
        "  window: {column: event_time, size: 1 minute}\n"
        "  group_by: [city]\n"
        "  measures: {gmv: sum(amount), orders: count(*)}\n"
        "sink: {mode: upsert, keys: [window_start, city]}\n"
        + (f"publish: {{kafka: {{topic: {publish_topic}}}}}\n" if publish_topic else "")
    )
    return root
