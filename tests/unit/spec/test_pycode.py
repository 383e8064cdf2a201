"""Importing a project's own code from threads that run side by side."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from warehouse.spec.pycode import import_reference


def test_references_resolve_from_threads_at_once(tmp_path: Path) -> None:
    # Tables whose batches run side by side resolve their transforms on their own
    # threads. Each resolution invalidates the import caches, which deletes the cache
    # entries of path entries without a finder (such as the standard library's zip that
    # sys.path names and no install has): two at once deleted the same entry, and one
    # failed with a KeyError naming it.
    (tmp_path / "layers").mkdir()
    (tmp_path / "layers" / "__init__.py").write_text("")
    (tmp_path / "layers" / "build.py").write_text("def build(df, ctx):\n    return df\n")
    errors: list[Exception] = []
    resolved: list[object] = []

    def resolve() -> None:
        try:
            for _ in range(1000):
                sys.path_importer_cache["entry-without-a-finder"] = None
                resolved.append(import_reference(tmp_path, "layers.build:build"))
        except Exception as e:  # noqa: BLE001 (a thread's error, named by the assertion below)
            errors.append(e)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often enough to meet in the window
    try:
        threads = [threading.Thread(target=resolve) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(resolved) == 4000
    assert {getattr(f, "__name__", None) for f in resolved} == {"build"}
