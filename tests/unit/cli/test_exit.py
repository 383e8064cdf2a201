"""The `warehouse` command's exit: what the interpreter does after the command ran."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RUNS = {
    "warehouse": "from warehouse.cli.main import entry; entry()",
    "python -m warehouse": "import runpy; runpy.run_module('warehouse', run_name='__main__')",
}


@pytest.mark.parametrize("command", RUNS)
def test_the_command_exits_with_its_objects_frozen_and_its_exit_handlers_run(
    command: str, tmp_path: Path
) -> None:
    """The command (the `warehouse` script and `python -m warehouse`) freezes its objects
    before the interpreter exits, so that the exit's collections skip them
    (docs/decisions/0058); the atexit handlers still run."""
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
        f"sys.argv = ['warehouse', 'init', {str(tmp_path / 'p')!r}]\n"
        f"{RUNS[command]}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "frozen True", done.stdout[-3000:]
    assert (tmp_path / "p" / "conf").is_dir()
