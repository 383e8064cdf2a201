"""JSON Schema `required`: a record without a required field goes to quarantine with the
reason "missing required field `id`", whichever path parses it.

One project, one topic per format, a table per parse path: `ods_arrow` (Arrow's parse,
records it hands back parsed by Spark), `ods_one_pass` (Spark's parse, one pass: an
expectation Arrow does not judge, a regex, keeps it off the Arrow path), `ods_cached` (Spark's parse, the cached path:
an SQL transform), plus a Debezium and an upsert-json table. Real broker, real Spark,
real Delta; the tables and their quarantine are read back from Delta.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from streams.kafka.admin import produce
from tests.integration.projects import new_topic, start_project
from tests.integration.projects import table_rows as rows
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "note": {"type": ["string", "null"]},
    },
    # `note` may be null: required only to be present, which a parse cannot tell from
    # null, so it is not enforced (docs/architecture.md, "Formats").
    "required": ["id", "name", "note"],
}

JSON_RECORDS: list[tuple[str, str]] = [
    ("k0", '{"id": 1, "name": "a", "note": "x"}'),
    ("k1", '{"name": "b", "note": "no id"}'),  # missing: quarantined
    ("k2", '{"id": null, "name": "c"}'),  # null counts as missing
    ("k3", '{"id": 4, "name": "d"}'),  # `note` may be absent or null
    ("k4", '{"id": 5, "note": "no name"}'),
    ("k5", '{"note": "neither"}'),
    ("k6", '{"id": "seven", "name": "g"}'),  # a wrong type, as before
    ("k7", '{"id": 8, "name": "h", "note": null}'),
]
GOOD = [(1, "a", "x", 0), (4, "d", None, 3), (8, "h", None, 7)]  # sorted by repr
BAD = [
    (1, "parse error: missing required field `id`"),
    (2, "parse error: missing required field `id`"),
    (4, "parse error: missing required field `name`"),
    (5, "parse error: missing required field `id`; missing required field `name`"),
    (6, "parse error: field `id`: expected bigint, got string"),
]


def _cdc(op: str, before: dict | None, after: dict | None) -> str:
    return json.dumps(
        {"before": before, "after": after, "op": op, "source": {"ts_ms": 100}, "ts_ms": 100}
    )


CDC_RECORDS: list[tuple[str, str | None]] = [
    ("u1", _cdc("c", None, {"id": 1, "name": "a"})),
    ("u2", _cdc("c", None, {"name": "no id"})),  # quarantined
    ("u1", _cdc("u", {"id": 1, "name": "a"}, {"id": 1})),  # quarantined: no name
    # Postgres' default replica identity: a delete's `before` holds the key alone.
    ("u1", _cdc("d", {"id": 1}, None)),
    ("u1", None),  # the tombstone after a delete: skipped
]
UPSERT_RECORDS: list[tuple[str, str | None]] = [
    ('{"id": 1}', '{"id": 1, "name": "a"}'),
    ('{"id": 2}', '{"id": 2}'),  # quarantined: no name
    ('{"id": 1}', None),  # a delete: the key's fields, nothing required of the value
]


def _project(root: Path, bootstrap: str, topics: dict[str, str]) -> Project:
    ods = start_project(root, bootstrap, "ods", schemas={"people.json": json.dumps(SCHEMA)})

    def source(topic: str, fmt: str) -> str:
        return f"source:\n  kafka: {{topic: {topic}, format: {fmt}, schema: people}}\n"

    json_src = source(topics["json"], "json")
    (ods / "arrow.yml").write_text(f"table: ods_arrow\n{json_src}")
    (ods / "one_pass.yml").write_text(
        f"table: ods_one_pass\n{json_src}expectations:\n"
        "  - expect_column_values_to_match_regex: {column: name, regex: '.'}\n"
    )
    (ods / "cached.yml").write_text(
        f"table: ods_cached\n{json_src}transform:\n  sql: SELECT * FROM source\n"
    )
    (ods / "cdc.yml").write_text(f"table: ods_cdc\n{source(topics['cdc'], 'debezium-json')}")
    (ods / "upsert.yml").write_text(f"table: ods_upsert\n{source(topics['upsert'], 'upsert-json')}")
    return Project.load(root)


def test_a_record_without_a_required_field_is_quarantined_on_every_path(
    spark, broker, unique, tmp_path: Path, caplog
) -> None:
    topics = {
        kind: new_topic(broker.bootstrap, unique(f"required-{kind}"))
        for kind in ("json", "cdc", "upsert")
    }
    produce(broker.bootstrap, topics["json"], JSON_RECORDS)
    produce(broker.bootstrap, topics["cdc"], CDC_RECORDS)
    produce(broker.bootstrap, topics["upsert"], UPSERT_RECORDS)
    project = _project(tmp_path / "proj", broker.bootstrap, topics)
    caplog.set_level(logging.INFO, logger="warehouse.runtime.writer")

    results = {r.table: r for r in Pipeline(project, spark, layer="ods").run(once=True)}

    logged = [r.getMessage() for r in caplog.records if "rows in" in r.getMessage()]
    for table, path in (("ods_arrow", "(Arrow)"), ("ods_one_pass", "(one pass)")):
        assert any(f"{table}: batch 0 {path}" in m for m in logged), (table, logged)
    assert any("ods_cached: batch 0:" in m for m in logged), logged

    quarantine_cols = ["source_offset", "reason"]
    for table in ("ods_arrow", "ods_one_pass", "ods_cached"):
        assert rows(project.table_path(table), ["id", "name", "note", "_offset"]) == GOOD, table
        assert rows(project.quarantine_path(table), quarantine_cols) == BAD, table
        r = results[table]
        assert (r.rows_read, r.rows_written, r.quarantined) == (8, 3, 5), table

    assert rows(project.table_path("ods_cdc"), ["id", "name", "_op", "_offset"]) == [
        (1, "a", "c", 0),
        (1, None, "d", 3),
    ]
    assert rows(project.quarantine_path("ods_cdc"), quarantine_cols) == [
        (1, "parse error: missing required field `id`"),
        (2, "parse error: missing required field `name`"),
    ]
    assert rows(project.table_path("ods_upsert"), ["id", "name", "_deleted", "_offset"]) == [
        (1, "a", False, 0),
        (1, None, True, 2),
    ]
    assert rows(project.quarantine_path("ods_upsert"), quarantine_cols) == [
        (1, "parse error: missing required field `name`"),
    ]
