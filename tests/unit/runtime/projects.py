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
) -> Path:
    """Write the project into `root` and return it."""
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
engines: {{kafka: auto, delta: auto}}
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
