"""`warehouse ui` refuses a port another process serves on, naming it (exit 2), and
stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ports import free_port
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


def test_sigterm_stops_the_page_as_ctrl_c_does(tmp_path: Path) -> None:
    """The server returns and the view closes the consumers it keeps (exit 0, not killed
    by the signal)."""
    proj = write_project(tmp_path / "p", bootstrap="127.0.0.1:1")
    port = free_port()
    ui = subprocess.Popen(
        [sys.executable, "-m", "warehouse", "--project", str(proj), "ui", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).parents[3],
    )
    try:
        deadline = time.monotonic() + 60
        while not _serving(port):
            assert ui.poll() is None and time.monotonic() < deadline, ui.stdout
            time.sleep(0.2)
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(30) == 0, ui.stdout.read() if ui.stdout else ""
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait(30)


def _serving(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
