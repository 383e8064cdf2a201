"""`warehouse broker start|status|stop` against a real broker process (detached, as users
run it), stopped at the end by its pid file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.cli.test_cli import run_cli
from tests.unit.runtime.projects import write_project


@pytest.mark.kafka
def test_broker_start_status_stop_through_the_cli(tmp_path: Path) -> None:
    from streams.broker.launcher import broker_status, stop_broker

    proj = write_project(tmp_path / "proj")  # embedded broker: 127.0.0.1, port 0
    data = tmp_path / "broker-data"
    try:
        started = run_cli("--project", str(proj), "broker", "start", "--data-dir", str(data))
        assert started.returncode == 0, started.stderr
        live = broker_status(data)
        assert live is not None and live["host"] == "127.0.0.1" and live["port"] > 0
        assert f"broker running at {live['bootstrap']}" in started.stdout
        status = run_cli("--project", str(proj), "broker", "status", "--data-dir", str(data))
        assert status.returncode == 0 and json.loads(status.stdout)["pid"] == live["pid"]
        again = run_cli("--project", str(proj), "broker", "start", "--data-dir", str(data))
        assert again.returncode == 0 and broker_status(data)["pid"] == live["pid"]  # reused
        stopped = run_cli("--project", str(proj), "broker", "stop", "--data-dir", str(data))
        assert stopped.returncode == 0 and "broker stopped" in stopped.stdout
        assert broker_status(data) is None
        gone = run_cli("--project", str(proj), "broker", "status", "--data-dir", str(data))
        assert gone.returncode == 1 and "no broker running" in gone.stdout
    finally:
        stop_broker(data)


@pytest.mark.kafka
def test_embedded_bootstrap_starts_the_broker_on_demand_and_reuses_it(tmp_path: Path) -> None:
    from streams.broker.launcher import broker_status, stop_broker
    from warehouse import Project
    from warehouse.runtime.bootstrap import resolve_bootstrap

    project = Project.load(write_project(tmp_path / "proj"))  # bootstrap: embedded, port 0
    data = project.broker_dir()
    assert data == Path(project.root) / "broker"
    try:
        assert resolve_bootstrap(project, start=False) is None  # status never starts one
        assert not data.exists() or broker_status(data) is None
        first = resolve_bootstrap(project)
        assert first is not None and first.startswith("127.0.0.1:")
        pid = broker_status(data)["pid"]
        assert resolve_bootstrap(project) == first
        assert resolve_bootstrap(project, start=False) == first
        assert broker_status(data)["pid"] == pid
    finally:
        stop_broker(data)
    assert broker_status(data) is None
