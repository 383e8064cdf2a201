"""A Delta table's current rows as one Arrow table, read in this process.

`DeltaTable.to_pyarrow_table()` (deltalake 1.6) scans through deltalake's Python
filesystem handler from Arrow's reader threads, and a process that did so aborts at
exit now and then with `terminate called without an active exception` (SIGABRT, exit
-6), after all its work and output are done: 20 of 60 runs of a script that reads a
3-file table and exits (apache/arrow#34314 and delta-io/delta-rs#2184 describe the
same). A `warehouse status --json` subprocess died that way in CI. Read through
Arrow's own local filesystem instead (0 of 60, threads kept), or, for a remote table,
through the handler on the calling thread only (0 of 60 locally).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
from deltalake import DeltaTable

from streams.delta.tables import open_table


def _local_root(uri: str) -> str | None:
    """The directory of a table URI on the local filesystem, else None."""
    if "://" not in uri:
        return os.path.abspath(uri)
    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return unquote(parsed.path).rstrip("/") or "/"
    return None


def read_table(table: DeltaTable | str | Path, *, columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of `table` (a `DeltaTable` or its path) at its loaded version, with only
    `columns` when given."""
    import pyarrow.fs as pafs

    dt = table if isinstance(table, DeltaTable) else open_table(str(table))
    cols = list(columns) if columns is not None else None
    root = _local_root(dt.table_uri)
    if root is not None:
        fs = pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())
        return dt.to_pyarrow_dataset(filesystem=fs).to_table(columns=cols)
    return dt.to_pyarrow_dataset().to_table(columns=cols, use_threads=False)
