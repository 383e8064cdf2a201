"""CLI argument handling and exit codes (no Spark: plan, status, init, reset, errors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_project
from warehouse import Project
from warehouse.cli.main import main
from warehouse.generate import check_generate_project

REPO = Path(__file__).resolve().parents[3]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m warehouse ...` in a subprocess: what a user sees, stderr and exit code."""
    return subprocess.run(
        [sys.executable, "-m", "warehouse", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=120,
    )


def test_invalid_project_exits_2_naming_file_and_field_without_traceback(tmp_path: Path) -> None:
    proj = write_project(tmp_path / "proj")
    bad = proj / "layers" / "dwd" / "orders.yml"
    bad.write_text(
        bad.read_text().replace("dedupe: {keys: [order_id]}", "dedup: {keys: [order_id]}")
    )
    result = run_cli("--project", str(proj), "plan")
    assert result.returncode == 2, result.stderr
    assert "layers/dwd/orders.yml" in result.stderr
    assert "dedup" in result.stderr
    assert "Traceback" not in result.stderr
    verbose = run_cli("--project", str(proj), "-v", "plan")
    assert verbose.returncode == 2
    assert "Traceback" in verbose.stderr


def test_plan_json_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = write_project(tmp_path / "proj")
    assert main(["--project", str(proj), "plan", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in data["tables"]] == ["ods_orders", "dwd_orders"]
    assert main(["--project", str(proj), "plan", "--layer", "dwd", "--format", "mermaid"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flowchart LR") and "t_dwd_orders" in out


def test_unknown_table_and_missing_project_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = write_project(tmp_path / "proj")
    assert main(["--project", str(proj), "plan", "--table", "nope"]) == 2
    assert "Unknown table `nope`" in capsys.readouterr().err
    assert main(["--project", str(tmp_path / "missing"), "plan"]) == 2
    assert "no project folder" in capsys.readouterr().err


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(["run", "--layer", "gold"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["recover"])  # --table is required
    assert e.value.code == 2


def test_reset_needs_yes_and_removes_table_checkpoint_and_quarantine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = write_project(tmp_path / "proj")
    root = proj / ".warehouse"
    made = [
        root / "tables" / "ods_orders" / "_delta_log",
        root / "checkpoints" / "ods_orders" / "offsets",
        root / "tables" / "ods_orders__quarantine" / "_delta_log",
        root / "tables" / "dwd_orders" / "_delta_log",
    ]
    for d in made:
        d.mkdir(parents=True)
    assert main(["--project", str(proj), "reset", "--table", "ods_orders"]) == 2
    assert "--yes" in capsys.readouterr().err
    assert all(d.exists() for d in made)
    (root / "checkpoints" / "dwd_orders" / "offsets").mkdir(parents=True)
    assert main(["--project", str(proj), "reset", "--table", "ods_orders", "--yes"]) == 0
    assert [d.exists() for d in made] == [False, False, False, True]
    # Its reader's checkpoint holds a position in the table just removed: said.
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith(
            "note: `dwd_orders` read `ods_orders` as a stream, directly or not; their checkpoints"
        )
    )


def test_init_scaffolds_a_project_that_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "new"
    assert main(["init", str(target)]) == 0
    assert (target / "conf" / "local.yml").is_file()
    assert (target / "README.md").is_file()
    capsys.readouterr()
    assert main(["--project", str(target), "plan", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in data["tables"]] == ["ods_events", "dwd_events", "ads_event_totals"]
    # A second init into the now non-empty folder refuses.
    assert main(["init", str(target)]) == 2
    assert "not empty" in capsys.readouterr().err


def test_demo_refuses_a_project_that_reads_topics_it_does_not_produce(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`warehouse demo` produces the example's topics only: a scaffolded project reads
    `events`, so it is refused before Spark or a broker starts, naming table and file."""
    target = tmp_path / "new"
    assert main(["init", str(target)]) == 0
    capsys.readouterr()
    assert main(["--project", str(target), "demo"]) == 2
    err = capsys.readouterr().err
    assert "table `ods_events` (layers/ods/events.yml) reads `events`" in err
    assert "`orders`, `payments`, `page_views`, `shop.users`, `shop.products`" in err
    assert not (target / ".warehouse").exists()  # no broker, no tables


def test_generate_refuses_a_project_that_reads_none_of_its_topics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The generator's events would go to topics a scaffolded project does not read: it is
    refused before a broker starts, naming a table, its file and what it reads. The example
    project (the repository's root) is fed as before."""
    target = tmp_path / "new"
    assert main(["init", str(target)]) == 0
    capsys.readouterr()
    assert main(["--project", str(target), "generate", "--events", "10"]) == 2
    err = capsys.readouterr().err
    assert "`orders`, `payments`, `page_views`, `shop.users`, `shop.products`" in err
    assert "table `ods_events` (layers/ods/events.yml) reads `events`" in err
    assert "`warehouse produce --topic T FILE`" in err
    assert not (target / ".warehouse").exists()  # no broker
    check_generate_project(Project.load(REPO))


def test_status_json_before_any_run_does_not_start_a_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = write_project(tmp_path / "proj")  # bootstrap: embedded, nothing running
    assert main(["--project", str(proj), "status", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["tables"]
    assert [r["table"] for r in rows] == ["ods_orders", "dwd_orders"]
    assert all(r["exists"] is False and r["version"] is None and r["lag"] is None for r in rows)
    assert not (proj / ".warehouse" / "broker").exists()


def test_submit_script_runs_as_a_file_and_reports_project_errors(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "warehouse" / "submit.py"),
            "--project",
            str(tmp_path / "nope"),
            "--layer",
            "ods",
            "--once",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "no project folder" in result.stderr and "Traceback" not in result.stderr


def test_run_refuses_refresh_options_that_do_not_go_together_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = str(write_project(tmp_path / "proj"))
    for args, said in (
        (["--allow-data-loss"], "give it with `--full-refresh T[,U]` or `--full-refresh-all`"),
        (["--full-refresh", "ods_orders", "--full-refresh-all"], "give one"),
        (["--refresh", "ods_orders", "--table", "dwd_orders"], "as `--table` does; give one"),
        (["--full-refresh", "nope"], "Unknown table `nope`"),
    ):
        assert main(["--project", proj, "run", "--once", *args]) == 2
        assert said in capsys.readouterr().err
