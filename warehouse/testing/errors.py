"""Errors of `warehouse test`: test files that cannot run, and a selection of none."""

from __future__ import annotations

from warehouse.errors import WarehouseError
from warehouse.spec.errors import ProjectError


class TableTestFileError(ProjectError):
    """Test files that cannot run: each problem names its file and field (exit 2)."""


class NoTestsSelectedError(WarehouseError):
    """`--table` or `--select` chose none of the project's tests (exit 2)."""

    exit_code = 2
