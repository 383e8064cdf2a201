"""`warehouse test` on the starter project (passing and failing tests, malformed ones)
and on the bundled example (a test of each table), on both engines, in process on the
shared session and as the command (real Spark, real Delta, no broker)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from warehouse.cli.main import main
from warehouse.project import Project
from warehouse.testing import TableTestFileError

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]

FAILING = """\
tests:
  - name: wrong kind and a row too many
    table: dwd_events
    given:
      ods_events:
        - {event_id: e1, kind: View, amount: 1, event_time: "2026-01-01 10:00:00"}
        - {event_id: e2, kind: Buy, amount: 2.5, event_time: "2026-01-01 10:00:10"}
    expect:
      rows:
        - {event_id: e1, kind: View, amount: 1}
  - name: the quarantine count differs
    table: ods_events
    given:
      events: [{kind: view, event_time: "2026-01-01T10:00:00Z"}]
    expect:
      rows: []
      quarantine: 0
"""


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    target = tmp_path / "shop"
    assert main(["init", str(target)]) == 0
    (target / "tests" / "failing.yml").write_text(FAILING)
    return target


def test_passing_and_failing_tests_on_each_engine(
    spark, engine: str, project_dir: Path, tmp_path: Path
) -> None:
    project = Project.load(project_dir, engines={"kafka": engine, "delta": engine})
    tests = project.table_tests()
    results = project.test_runner(spark, tmp_path / "work").run(tests)
    by_name = {r.test.name: r for r in results}
    assert [r.error for r in results] == [None] * 4
    assert by_name["events land typed; one without an id is quarantined"].passed
    assert by_name["a repeated event counts once and kinds are lower-cased"].passed
    wrong = by_name["wrong kind and a row too many"]
    assert not wrong.passed and wrong.rows is not None
    assert wrong.rows.columns == ["event_id", "kind", "amount"]
    assert [list(r) for r in wrong.rows.missing] == [["e1", "View", 1]]
    assert sorted(str(list(r)) for r in wrong.rows.unexpected) == [
        "['e1', 'view', Decimal('1.00')]",
        "['e2', 'buy', Decimal('2.50')]",
    ]
    counted = by_name["the quarantine count differs"]
    assert not counted.passed and counted.quarantine_count == (0, 1)
    assert "  quarantine: expected 0 rows, got 1" in counted.report()
    # Nothing of the project's own root was written.
    assert not (project_dir / ".warehouse").exists()


def _warehouse(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "warehouse", "--project", str(project), "test", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )


FEDERATED = """\
tests:
  - name: a federated table's records are its first cluster's
    table: ods_events
    given:
      events: [{event_id: e1, kind: view, event_time: "2026-01-01T10:00:00Z"}]
    expect:
      rows: [{event_id: e1, _cluster: default}]
"""


def test_a_federated_tables_test_reads_its_records_as_its_first_clusters(
    spark, project_dir: Path, tmp_path: Path
) -> None:
    """`warehouse test` gives a federated table's records the `_cluster` of its first
    cluster (no broker: the clusters are not asked)."""
    conf = project_dir / "conf" / "local.yml"
    conf.write_text(
        conf.read_text().replace("clusters: {}", 'clusters: {eu: {bootstrap: "eu-1:9092"}}')
    )
    events = project_dir / "layers" / "ods" / "events.yml"
    events.write_text(
        events.read_text().replace("topic: events,", "topic: events, clusters: [eu, default],")
    )
    for test in (project_dir / "tests").iterdir():
        test.unlink()
    (project_dir / "tests" / "federated.yml").write_text(FEDERATED)
    project = Project.load(project_dir, engines={"kafka": "python", "delta": "python"})
    [result] = project.test_runner(spark, tmp_path / "work").run(project.table_tests())
    assert result.error is None and result.passed, result.report()


@pytest.mark.slow
def test_the_command_prints_the_differing_rows_and_exits_1(project_dir: Path) -> None:
    done = _warehouse(project_dir, "--engine", "python", "--table", "dwd_events")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "ok   dwd_events: a repeated event counts once and kinds are lower-cased" in out
    assert "FAIL dwd_events: wrong kind and a row too many (tests/failing.yml" in out
    assert (
        '  missing rows (expected, not in the table):\n    {"event_id": "e1", "kind": "View", "amount": 1.0}'
        in out
    )
    assert '    {"event_id": "e2", "kind": "buy", "amount": 2.5}' in out
    assert "1 passed, 1 failed" in out
    (project_dir / "tests" / "failing.yml").unlink()
    done = _warehouse(project_dir, "--engine", "python", "--select", "a repeated*")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 0 failed" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(1200)  # twelve tables, each run once, on a busy 2-core machine
def test_the_bundled_example_passes_a_test_of_each_table(
    spark, engine: str, tmp_path: Path
) -> None:
    project = Project.load(ROOT, environ={}, engines={"kafka": engine, "delta": engine})
    tests = project.table_tests()
    assert {t.table for t in tests} == set(project.tables)
    results = project.test_runner(spark, tmp_path / "work").run(tests)
    assert [(r.test.name, r.report()) for r in results if not r.passed] == []


def test_a_column_the_table_lacks_or_a_value_of_another_type_is_a_malformed_test(
    spark, project_dir: Path, tmp_path: Path
) -> None:
    (project_dir / "tests" / "failing.yml").write_text(
        "tests:\n"
        "  - name: a column that is not there\n"
        "    table: dwd_events\n"
        "    given: {ods_events: [{event_id: e1, colour: red}]}\n"
        "    expect: {rows: []}\n"
        "  - name: a value that is not of its column's type\n"
        "    table: dwd_events\n"
        "    given: {ods_events: [{event_id: e1, amount: 1}]}\n"
        "    expect: {rows: [{event_id: e1, amount: 1}, {event_id: e2, amount: lots}]}\n"
    )
    project = Project.load(project_dir, engines={"kafka": "python", "delta": "python"})
    runner = project.test_runner(spark, tmp_path / "work")
    for test, field, message in [
        (
            "a column that is not there",
            "tests[0].given.ods_events[0].colour",
            "`colour` is not a column of `ods_events`",
        ),
        (
            "a value that is not of its column's type",
            "tests[1].expect.rows[1]",
            "a value is not of its column's type (`dwd_events`: `event_id` string, "
            "`amount` decimal(12,2))",
        ),
    ]:
        with pytest.raises(TableTestFileError) as e:
            runner.run(project.table_tests(select=[test]))
        [problem] = e.value.problems
        assert (problem.path, problem.field) == ("tests/failing.yml", field)
        assert message in problem.message
