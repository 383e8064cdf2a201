"""Where tables live: local paths and object storage, for both engines.

The one package that knows about storage. Locations are strings (a path, or a URI:
`s3://`/`s3a://` with one meaning, `abfss://`, `gs://`, `hdfs://`) everywhere above
it; here they become pyarrow file systems (`files`), delta-rs storage options and
Hadoop settings (`StorageSettings`), and leases that keep one process per table on
object storage (`Lease`, over obstore's conditional put). It imports nothing of ours:
`streams.kafka` and `streams.delta` stand on it.

Callers import from this package only. docs/cluster.md says what users set.
"""

from __future__ import annotations

from streams.storage.errors import (
    LeaseLostError,
    LeaseUnsupportedError,
    StorageConfigError,
    StorageError,
)
from streams.storage.files import (
    exists,
    is_dir,
    is_file,
    list_names,
    read_bytes,
    read_text,
    remove,
    size,
    walk_file_times,
    walk_files,
    write_bytes,
    write_text,
)
from streams.storage.lease import Lease
from streams.storage.location import (
    is_local,
    is_s3,
    join,
    local_path,
    name,
    parent,
    resolve,
    scheme,
)
from streams.storage.settings import (
    DEFAULT_LEASE_SECONDS,
    StorageSettings,
    configure,
    configured,
    current,
    overrides,
)

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "Lease",
    "LeaseLostError",
    "LeaseUnsupportedError",
    "StorageConfigError",
    "StorageError",
    "StorageSettings",
    "configure",
    "configured",
    "current",
    "exists",
    "is_dir",
    "is_file",
    "is_local",
    "is_s3",
    "join",
    "list_names",
    "local_path",
    "name",
    "overrides",
    "parent",
    "read_bytes",
    "read_text",
    "remove",
    "resolve",
    "scheme",
    "size",
    "walk_file_times",
    "walk_files",
    "write_bytes",
    "write_text",
]
