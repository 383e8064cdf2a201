"""Table test files: the model, discovery, and every problem named by file and field
(no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from warehouse.cli.main import main
from warehouse.project import Project
from warehouse.testing import TableTestFile, TableTestFileError, load_tests, table_test_files


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """The starter project of `warehouse init`, with its scaffolded table tests."""
    target = tmp_path / "shop"
    assert main(["init", str(target)]) == 0
    return target


def _write(project_dir: Path, rel: str, text: str) -> None:
    path = project_dir / "tests" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_init_scaffolds_tests_that_load(project_dir: Path) -> None:
    tests = Project.load(project_dir).table_tests()
    assert [(t.table, t.file, t.index) for t in tests] == [
        ("ods_events", "tests/events.yml", 0),
        ("dwd_events", "tests/events.yml", 1),
    ]
    records = tests[0].test.given["events"]
    assert isinstance(records[0], dict) and records[2] == "not json"
    assert tests[0].test.expect.quarantine == 2


def test_the_model_forbids_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="expectt"):
        TableTestFile.model_validate(
            {"tests": [{"name": "n", "table": "t", "expect": {"rows": []}, "expectt": {}}]}
        )
    with pytest.raises(ValidationError, match="quarantine"):
        TableTestFile.model_validate(
            {"tests": [{"name": "n", "table": "t", "expect": {"rows": [], "quarantine": -1}}]}
        )


def test_selection_by_table_and_name(project_dir: Path) -> None:
    project = Project.load(project_dir)
    assert [t.table for t in project.table_tests(tables=["dwd_events"])] == ["dwd_events"]
    assert [t.table for t in project.table_tests(select=["*quarantined"])] == ["ods_events"]
    with pytest.raises(Exception, match="No table test matches `nothing`") as e:
        project.table_tests(select=["nothing"])
    assert getattr(e.value, "exit_code", None) == 2


def test_a_fixture_project_inside_tests_is_not_a_test_file(project_dir: Path) -> None:
    _write(project_dir, "fixtures/other/layers/ods/x.yml", "table: x\n")
    _write(project_dir, "fixtures/other/conf/local.yml", "warehouse_root: w\n")
    assert [p.name for p in table_test_files(project_dir)] == ["events.yml"]


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (
            "tests:\n  - {name: a, table: ods_events, expect: {rowz: []}}\n",
            "tests[0].expect.rowz",
            "rowz",
        ),
        ("tests:\n  - {name: a, table: ods_events}\n", "tests[0].expect", "missing"),
        (
            "tests:\n  - {name: a, table: nope, expect: {rows: []}}\n",
            "tests[0].table",
            "`nope` is not a table of the project",
        ),
        (
            "tests:\n  - {name: a, table: dwd_events, given: {orders: []}, expect: {rows: []}}\n",
            "tests[0].given.orders",
            "give one of: `ods_events`",
        ),
        (
            "tests:\n  - {name: a, table: dwd_events, given: {ods_events: [raw]},"
            " expect: {rows: []}}\n",
            "tests[0].given.ods_events[0]",
            "is an object of its columns",
        ),
        (
            "tests:\n  - {name: a, table: ods_events, expect: {rows: [{a: 1}, {b: 2}]}}\n",
            "tests[0].expect.rows[1]",
            "every row lists the same ones",
        ),
        (
            "tests:\n  - {name: events land typed; one without an id is quarantined,"
            " table: ods_events, expect: {rows: []}}\n",
            "tests[0].name",
            "also used in tests/events.yml",
        ),
        ("tests: [\n", "", "YAML syntax error"),
    ],
)
def test_a_malformed_file_names_file_and_field(
    project_dir: Path, text: str, field: str, message: str
) -> None:
    _write(project_dir, "more/bad.yml", text)
    with pytest.raises(TableTestFileError) as e:
        load_tests(Project.load(project_dir))
    problem = next(p for p in e.value.problems if p.field == field)
    assert problem.path == "tests/more/bad.yml"
    assert message in problem.message
    assert e.value.exit_code == 2


def test_the_cli_exits_2_on_a_malformed_file_before_spark(
    project_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(project_dir, "bad.yml", "tests:\n  - {name: a, table: ods_events, expect: {}}\n")
    assert main(["test", "--project", str(project_dir)]) == 2
    err = capsys.readouterr().err
    assert "tests/bad.yml: tests[0].expect.rows" in err
