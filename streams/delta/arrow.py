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

import bisect
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
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


def read_table(
    table: DeltaTable | str | Path,
    *,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,  # pyarrow's own name
    keys_in: Mapping[str, pa.Array | pa.ChunkedArray] | None = None,
) -> pa.Table:
    """The rows of `table` (a `DeltaTable` or its path) at its loaded version, with only
    `columns` when given, and only the rows `filter` keeps.

    `keys_in` (columns, which must be among `columns`, and their values): only the rows
    whose columns each hold one of the values, read from the files whose Delta
    statistics (min and max per column, in the log) may hold them; the other files are
    not opened. Delta's statistics and not the Parquet reader's: delta-rs writes strings
    as `string_view`, which Arrow's statistics pushdown cannot compare with a `string`
    value."""
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    dt = table if isinstance(table, DeltaTable) else open_table(str(table))
    cols = list(columns) if columns is not None else None
    root = _local_root(dt.table_uri)
    local = root is not None
    if local:
        fs = pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())
        dataset = dt.to_pyarrow_dataset(filesystem=fs)
    else:
        dataset = dt.to_pyarrow_dataset()
    if keys_in is None:
        return dataset.to_table(columns=cols, filter=filter, use_threads=local)
    assert cols is None or set(keys_in) <= set(cols), "keys_in needs its columns read"
    holding = files_holding(dt, keys_in)
    if holding is not None and isinstance(dataset, pads.FileSystemDataset):
        fragments = [
            f for f in dataset.get_fragments() if _table_file(f.path, dt.table_uri) in holding
        ]
        dataset = pads.FileSystemDataset(
            fragments, dataset.schema, dataset.format, dataset.filesystem
        )
    data = dataset.to_table(columns=cols, filter=filter, use_threads=local)
    mask = None
    for name, values in keys_in.items():
        column = data.column(name)
        wanted = pc.unique(_array(values).drop_null()).cast(column.type)
        part = pc.is_in(column, value_set=wanted)
        mask = part if mask is None else pc.and_(mask, part)
    return data if mask is None else data.filter(mask)


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _table_file(path: str, uri: str) -> str:
    """A fragment's path as the Delta log names the file: relative to the table. A local
    table's file system is rooted at the table; a remote table's fragments are relative
    to it through delta-rs's own file system, or carry the bucket and the table's prefix
    through pyarrow's."""
    path = unquote(path)
    parsed = urlparse(uri)
    table = unquote(parsed.path).strip("/")
    for base in (f"{parsed.netloc}/{table}/", f"/{table}/", f"{table}/"):
        if table and path.startswith(base):
            return path[len(base) :]
    return path.lstrip("/")


def files_holding(
    table: DeltaTable, keys_in: Mapping[str, pa.Array | pa.ChunkedArray]
) -> set[str] | None:
    """The data files (paths as the log has them, unquoted) whose statistics may hold a
    row with one of the values in every column of `keys_in`; None when the log has no
    statistics for one of the columns (every file may)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    names = set(actions.column_names)
    may = [True] * actions.num_rows
    for name, values in keys_in.items():
        if f"min.{name}" not in names or f"max.{name}" not in names:
            return None
        wanted = sorted(pc.unique(_array(values).drop_null()).to_pylist())
        lows = actions.column(f"min.{name}").to_pylist()
        highs = actions.column(f"max.{name}").to_pylist()
        for i, (low, high) in enumerate(zip(lows, highs, strict=True)):
            if may[i]:
                may[i] = _in_range(wanted, low, high)
    paths = actions.column("path").to_pylist()
    return {unquote(p) for p, keep in zip(paths, may, strict=True) if keep}


def _in_range(wanted: list, low: object, high: object) -> bool:
    """Whether a value of `wanted` (sorted) lies within `[low, high]`; True when the
    statistics are missing or cannot be compared with the values."""
    if low is None or high is None:
        return True
    try:
        at = bisect.bisect_left(wanted, low)
        return at < len(wanted) and wanted[at] <= high
    except TypeError:
        return True
