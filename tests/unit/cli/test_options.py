"""`--project`, `--env` and `-v` before and after every command's name (parse level), and as
a user types them (`python -m warehouse plan --project DIR` on a scaffolded project)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from warehouse.cli import commands
from warehouse.cli.main import build_parser

# Each command with the least it needs to parse; broker's three actions each.
COMMANDS: dict[str, list[str]] = {
    "plan": ["plan"],
    "run": ["run", "--layer", "all", "--once"],
    "status": ["status", "--json"],
    "ui": ["ui", "--port", "9000"],
    "recover": ["recover", "--table", "t"],
    "reset": ["reset", "--table", "t", "--yes"],
    "init": ["init", "newdir"],
    "check": ["check"],
    "test": ["test", "--table", "t", "--select", "n*", "--engine", "python"],
    "optimize": ["optimize", "--table", "t"],
    "vacuum": ["vacuum", "--table", "t"],
    "broker start": ["broker", "start", "--port", "0"],
    "broker stop": ["broker", "stop"],
    "broker status": ["broker", "status"],
    "produce": ["produce", "--topic", "t", "in.jsonl"],
    "consume": ["consume", "--topic", "t", "--max", "1"],
    "mirror": ["mirror"],
    "demo": ["demo"],
    "generate": ["generate"],
    "jars": ["jars", "show"],
    "bundle": ["bundle"],
}
COMMON = ["--project", "/p", "--env", "cluster", "-v"]


def parse(argv: list[str]) -> dict[str, object]:
    return vars(build_parser().parse_args(argv))


def test_the_table_names_every_command_there_is() -> None:
    handlers = {name.removeprefix("cmd_") for name in dir(commands) if name.startswith("cmd_")}
    assert {name.split()[0] for name in COMMANDS} == handlers


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_common_options_before_and_after_the_command_parse_the_same(name: str) -> None:
    argv = COMMANDS[name]
    before = parse([*COMMON, *argv])
    after = parse([*argv, *COMMON])
    assert before == after
    assert (before["project"], before["env"], before["verbose"]) == ("/p", "cluster", True)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_without_common_options_the_defaults_hold(name: str) -> None:
    args = parse(COMMANDS[name])
    assert (args["project"], args["env"], args["verbose"]) == (".", "local", False)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_value_after_the_command_wins_and_one_before_stays_otherwise(name: str) -> None:
    argv = COMMANDS[name]
    args = parse(["--project", "/before", "--env", "e1", "-v", *argv, "--project", "/after"])
    assert (args["project"], args["env"], args["verbose"]) == ("/after", "e1", True)
    args = parse(["--env", "e1", *argv, "--env", "e2"])
    assert (args["project"], args["env"]) == (".", "e2")


def test_broker_takes_them_between_broker_and_its_action_too() -> None:
    args = parse(["broker", "--project", "/p", "status", "--data-dir", "d"])
    assert (args["project"], args["broker_command"], args["data_dir"]) == ("/p", "status", "d")
    args = parse(["broker", "--project", "/mid", "start", "--project", "/last", "--port", "1"])
    assert (args["project"], args["port"]) == ("/last", 1)


def warehouse(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_a_user_gives_the_options_after_the_command(tmp_path: Path) -> None:
    assert warehouse("init", "shop", cwd=tmp_path).returncode == 0
    shop = str(tmp_path / "shop")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    plan = warehouse("plan", "--project", shop, "--json", cwd=elsewhere)
    assert plan.returncode == 0, plan.stderr
    assert [t["name"] for t in json.loads(plan.stdout)["tables"]] == [
        "ods_events",
        "dwd_events",
        "ads_event_totals",
    ]
    # A project given before the command loses to the one after it.
    later = warehouse("--project", str(elsewhere), "plan", "--project", shop, cwd=elsewhere)
    assert later.returncode == 0, later.stderr

    status = warehouse("status", "--json", "--project", shop, "--env", "local", cwd=elsewhere)
    assert status.returncode == 0, status.stderr
    assert [r["exists"] for r in json.loads(status.stdout)["tables"]] == [False, False, False]

    # --env after the command is the one read: a missing conf/<env>.yml is a problem.
    env = warehouse("plan", "--project", shop, "--env", "nope", cwd=elsewhere)
    assert env.returncode == 2
    assert "conf/nope.yml" in env.stderr and "Traceback" not in env.stderr
    verbose = warehouse("plan", "--project", shop, "--env", "nope", "-v", cwd=elsewhere)
    assert verbose.returncode == 2 and "Traceback" in verbose.stderr
