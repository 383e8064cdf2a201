"""An upsert without `sequence_by` keeps the change with the greatest Kafka `_offset`, which
orders a key's changes only when they are all in one partition of one topic: the load
refuses it everywhere else, with file and field (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import Project, ProjectError
from warehouse.cli.main import main


def _project(root: Path, ods: str, dwd: str | None = None) -> Path:
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "ods" / "users.yml").write_text(f"table: ods_users\n{ods}")
    if dwd is not None:
        (root / "layers" / "dwd").mkdir(parents=True)
        (root / "layers" / "dwd" / "users.yml").write_text(
            f"table: dwd_users\nsource: {{table: ods_users}}\n{dwd}"
        )
    (root / "schemas").mkdir()
    (root / "schemas" / "users.ddl").write_text("user_id bigint, city string, seq bigint")
    return root


def _kafka(fmt: str, sink: str, *, topics: str = "topic: users") -> str:
    return f"source: {{kafka: {{{topics}, format: {fmt}, schema: users}}}}\nsink: {sink}\n"


UPSERT = "{mode: upsert, keys: [user_id]}"


@pytest.mark.parametrize(
    ("fmt", "topics", "why"),
    [
        ("json", "topic: users", "its `json` records need not be keyed by the sink keys"),
        ("raw", "topics: [users, more]", "it reads several topics"),
        ("debezium-json", "topic: users", "`_source_lsn` for Postgres, each change's position"),
        ("upsert-json", "topics: [users, more]", "it reads several topics"),
        ("upsert-json", "pattern: 'users.*'", "it reads several topics"),
    ],
)
def test_a_kafka_upsert_without_sequence_by_is_refused_unless_keyed_by_its_keys(
    tmp_path: Path, fmt: str, topics: str, why: str
) -> None:
    sink = UPSERT if fmt != "raw" else "{mode: upsert, keys: [key]}"
    with pytest.raises(ProjectError) as info:
        Project.load(_project(tmp_path, _kafka(fmt, sink, topics=topics)), environ={})
    [problem] = info.value.problems
    assert (problem.path, problem.field) == ("layers/ods/users.yml", "sink.sequence_by")
    assert problem.message.startswith(
        "Table `ods_users`: an `upsert` sink without `sequence_by` keeps, of a key's changes "
        "in a batch, the one with the greatest Kafka `_offset`, and offsets order records "
        "only within one partition of one topic: "
    )
    assert why in problem.message
    assert "Set `sink.sequence_by` to the column that orders a key's changes" in problem.message


@pytest.mark.parametrize(
    "ods",
    [
        _kafka("upsert-json", UPSERT),  # keyed by the sink keys, one topic
        _kafka("raw", "{mode: upsert, keys: [key]}"),  # the Kafka key is the sink key
        _kafka("json", "{mode: upsert, keys: [user_id], sequence_by: seq}"),
        _kafka("debezium-json", "{mode: upsert, keys: [user_id], sequence_by: _source_ts_ms}"),
        _kafka("debezium-json", "{mode: scd2, keys: [user_id], sequence_by: _source_lsn}"),
        _kafka("json", "{mode: upsert, keys: [user_id], sequence_by: _offset}"),  # declared
        _kafka("json", "{mode: scd2, keys: [user_id], sequence_by: seq}"),
        _kafka("json", "{mode: append}"),
    ],
)
def test_an_upsert_whose_order_is_known_loads(tmp_path: Path, ods: str) -> None:
    Project.load(_project(tmp_path, ods), environ={})


def test_a_table_whose_rows_carry_offsets_from_kafka_needs_sequence_by_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ods = _kafka("json", "{mode: append}")
    root = _project(tmp_path / "a", ods, f"sink: {UPSERT}\n")
    assert main(["--project", str(root), "plan"]) == 2
    err = capsys.readouterr().err
    assert "layers/dwd/users.yml: sink.sequence_by:" in err
    assert "its rows carry `_offset` from `ods_users`, which read Kafka" in err
    # Rows without `_offset`, or one row per key (a dedupe on the key, an aggregate): loads.
    for i, dwd in enumerate(
        [
            f'transform: {{sql: "SELECT user_id, city FROM source"}}\nsink: {UPSERT}\n',
            'transform: {sql: "SELECT user_id, city, _timestamp AS ts FROM source"}\n'
            "watermark: {column: ts, delay: 1 minute}\n"
            f"dedupe: {{keys: [user_id]}}\nsink: {UPSERT}\n",
        ]
    ):
        Project.load(_project(tmp_path / f"ok{i}", ods, dwd), environ={})
