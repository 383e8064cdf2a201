"""`warehouse test`: run the project's table tests and print what differed.

Exit 0 when every test passed, 1 when one failed (each failing test named with its
table, file, and the missing and unexpected rows), 2 when a test file is malformed
(each problem naming its file and field, before Spark starts).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warehouse.testing import TestResult


def cmd_test(args: argparse.Namespace) -> int:
    from warehouse.project import Project
    from warehouse.runtime import get_session

    overrides = {"engines": {"kafka": args.engine, "delta": args.engine}} if args.engine else {}
    project = Project.load(args.project, env=args.env, **overrides)
    tests = project.table_tests(tables=args.table or (), select=args.select or ())
    if not tests:
        print(f"no table tests in {project.path / 'tests'}", flush=True)
        return 0
    started = time.monotonic()
    spark = get_session(project.config.spark, app_name="warehouse-test")
    with tempfile.TemporaryDirectory(prefix="warehouse-test-") as work:
        results = project.test_runner(spark, Path(work)).run(tests, progress=_print)
    failed = [r for r in results if not r.passed]
    print(
        f"{len(results) - len(failed)} passed, {len(failed)} failed "
        f"({time.monotonic() - started:.1f}s)",
        flush=True,
    )
    return 1 if failed else 0


def _print(result: TestResult) -> None:
    t = result.test
    status = "ok  " if result.passed else "FAIL"
    print(f"{status} {t.table}: {t.name} ({t.file}, {result.seconds:.1f}s)", flush=True)
    for line in result.report():
        print(line, flush=True)
