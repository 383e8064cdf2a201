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

import json
import re

from deltalake import DeltaTable

import streams.storage as storage

REPLAY_MAX_VERSIONS = 100
"""The most versions a new stream replays from version 0 rather than start from a
snapshot: one checkpoint interval (docs/decisions/0009)."""

_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


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


def log_file(path: str, version: int) -> str:
    """The location of version `version`'s commit file in the log of the table at `path`."""
    return storage.join(path, "_delta_log", f"{version:020d}.json")


def appended_from_the_start(path: str) -> bool:
    """Whether the table at `path` is still what its appends made it: every commit file
    from version 0 on is in its log, there are at most `REPLAY_MAX_VERSIONS` of them, and
    none after version 0 removes a file or changes the metadata.

    Replaying such a table version by version yields exactly the rows of its newest
    snapshot. A compaction's `remove` (`dataChange` false) counts too: `vacuum` may have
    deleted the files it replaced, which a replay would read. Anything unreadable is
    answered False, which keeps the snapshot start (docs/decisions/0069)."""
    try:
        names = storage.list_names(storage.join(path, "_delta_log"))
        versions = [int(m.group(1)) for name in names if (m := _COMMIT_FILE.match(name))]
        if not versions or versions != list(range(len(versions))):
            return False
        if len(versions) > REPLAY_MAX_VERSIONS:
            return False
        for version in versions[1:]:
            text = storage.read_text(log_file(path, version))
            if text is None:
                return False
            for line in text.splitlines():
                action = json.loads(line) if line.strip() else {}
                if "remove" in action or "metaData" in action:
                    return False
    except (OSError, ValueError):
        return False
    return True
