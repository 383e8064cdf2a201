"""The upsert sink's `tombstone_retention`: a default, an interval, checked at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import Project, ProjectError


def _project(tmp_path: Path, sink: str) -> Path:
    ods = tmp_path / "layers" / "ods"
    ods.mkdir(parents=True)
    (ods / "users.yml").write_text(
        "table: ods_users\n"
        "source: {kafka: {topic: users, format: json, schema: users}}\n"
        f"sink: {sink}\n"
    )
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "users.ddl").write_text("id bigint, seq bigint")
    return tmp_path


def test_retention_defaults_to_seven_days(tmp_path: Path) -> None:
    project = Project.load(
        _project(tmp_path, "{mode: upsert, keys: [id], sequence_by: seq}"), environ={}
    )
    assert project.tables["ods_users"].spec.sink.tombstone_retention == "7 days"


@pytest.mark.parametrize("value", ["a week", "0 days", "7"])
def test_a_bad_retention_is_a_load_problem_with_file_and_field(tmp_path: Path, value: str) -> None:
    sink = f"{{mode: upsert, keys: [id], sequence_by: seq, tombstone_retention: {value}}}"
    with pytest.raises(ProjectError) as info:
        Project.load(_project(tmp_path, sink), environ={})
    [problem] = info.value.problems
    assert problem.path == "layers/ods/users.yml"
    assert problem.field == "sink.tombstone_retention"
    assert f"`{value}`" in problem.message
