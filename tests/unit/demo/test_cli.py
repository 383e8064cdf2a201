"""`warehouse generate` and `warehouse demo` refuse bad arguments before touching Kafka or Spark."""

from __future__ import annotations

import pytest

from warehouse.cli.main import main


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "--events", "-1"],
        ["generate", "--rate", "0"],
        ["demo", "--events", "-5"],
    ],
)
def test_out_of_range_arguments_exit_2_with_a_message(argv, capsys) -> None:
    assert main(["--project", "/nonexistent", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: `--events` must be >= 0"), err
