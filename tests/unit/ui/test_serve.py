"""`warehouse ui` refuses a port another process serves on, naming it (exit 2)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_project
from warehouse.cli.main import main


def test_a_taken_port_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = write_project(tmp_path / "p", bootstrap="127.0.0.1:1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["--project", str(proj), "ui", "--port", str(port)])
    assert code == 2
    err = capsys.readouterr().err
    assert f"error: Cannot serve the page on `127.0.0.1:{port}`" in err
    assert "Pick another port with `--port P`." in err
