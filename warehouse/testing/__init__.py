"""`warehouse test`: table unit tests from fixtures, without a broker or the project's root.

`load_tests` reads and checks `<project>/tests/**/*.yml` (`model.py`); `TableTestRunner`
runs each test's table once over its fixtures in a throwaway folder (`run.py`) and
compares the rows (`rows.py`). Importing it loads no Spark.
"""

from __future__ import annotations

from warehouse.testing.errors import NoTestsSelectedError, TableTestFileError
from warehouse.testing.load import LoadedTest, load_tests, select_tests, table_test_files
from warehouse.testing.model import Expected, TableTest, TableTestFile
from warehouse.testing.run import Comparison, TableTestRunner, TestResult

__all__ = [
    "Comparison",
    "Expected",
    "LoadedTest",
    "NoTestsSelectedError",
    "TableTest",
    "TableTestFile",
    "TableTestFileError",
    "TableTestRunner",
    "TestResult",
    "load_tests",
    "select_tests",
    "table_test_files",
]
