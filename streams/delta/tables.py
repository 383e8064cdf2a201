"""delta-rs tables at any location: a local path or a URI on object storage.

delta-rs reads credentials and endpoint from the standard variables itself; the
settings of `streams.storage` add what derives from them (plain HTTP for an `http://`
endpoint, the addressing) and a project's `storage.options`. Its commits on S3 are
conditional puts of the next log entry (`If-None-Match: *`): of two writers racing for
one version, one commits and the other fails (docs/decisions/0031). One writer per
table still holds (`warehouse.runtime.locks`): the guard that skips a replayed batch
reads the table before it commits.
"""

from __future__ import annotations

from deltalake import DeltaTable

import streams.storage as storage


def storage_options(path: str) -> dict[str, str] | None:
    """delta-rs's `storage_options` for the table at `path` (None for a local table)."""
    return storage.current().object_store_options(str(path))


def open_table(path: str, *, version: int | None = None) -> DeltaTable:
    """The table at `path` (at `version`, else its newest); raises delta-rs's
    `TableNotFoundError` when there is none."""
    path = str(path)
    return DeltaTable(path, version=version, storage_options=storage_options(path))


def is_table(path: str) -> bool:
    """Whether a Delta table is at `path`."""
    path = str(path)
    return DeltaTable.is_deltatable(path, storage_options=storage_options(path))
