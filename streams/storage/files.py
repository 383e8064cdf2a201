"""Small files and folders at a location, local or on object storage, through pyarrow's
file systems: what the framework keeps beside its tables (checkpoint entries it reads,
recovery files, quality state, reports) and the folders it removes.

On object storage a "folder" is a key prefix: it exists while an object is under it,
and writing an object needs no folder first. A write of one object is atomic there; on
a local disk `write_text` writes a temporary file and renames it into place.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

from streams.storage.location import OBJECT_STORE_SCHEMES, local_path, scheme
from streams.storage.settings import StorageSettings, current

if TYPE_CHECKING:
    import pyarrow.fs as pafs


def _fs(location: str, settings: StorageSettings | None) -> tuple[pafs.FileSystem, str]:
    return (settings or current()).filesystem(location)


def _info(location: str, settings: StorageSettings | None) -> pafs.FileInfo:
    fs, path = _fs(location, settings)
    return fs.get_file_info(path)


def _holds_object(location: str, settings: StorageSettings | None) -> bool:
    """Whether an object store holds any object under the prefix of `location`. A store
    may still list a prefix whose objects are all gone (S3Proxy's filesystem backend keeps
    the emptied directories, and no S3 request deletes them); such a folder is not there.
    Other file systems keep real folders: true."""
    if scheme(location) not in OBJECT_STORE_SCHEMES:
        return True
    import obstore

    from streams.storage.lease import object_store

    store, key = object_store(location, settings or current())
    for chunk in obstore.list(store, key + "/", chunk_size=1):
        return bool(chunk)
    return False


def exists(location: str, *, settings: StorageSettings | None = None) -> bool:
    """Whether a file or a (non-empty, on object storage) folder is at `location`."""
    import pyarrow.fs as pafs

    kind = _info(location, settings).type
    if kind == pafs.FileType.Directory:
        return _holds_object(location, settings)
    return kind != pafs.FileType.NotFound


def is_file(location: str, *, settings: StorageSettings | None = None) -> bool:
    import pyarrow.fs as pafs

    return _info(location, settings).type == pafs.FileType.File


def is_dir(location: str, *, settings: StorageSettings | None = None) -> bool:
    """Whether a folder is at `location` (on object storage, one that holds an object)."""
    import pyarrow.fs as pafs

    if _info(location, settings).type != pafs.FileType.Directory:
        return False
    return _holds_object(location, settings)


def read_bytes(location: str, *, settings: StorageSettings | None = None) -> bytes | None:
    """The bytes of the file at `location`, or None when there is none."""
    fs, path = _fs(location, settings)
    try:
        with fs.open_input_stream(path) as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:  # pyarrow's S3 says "Path does not exist" as an OSError
        if "does not exist" in str(e) or "NoSuchKey" in str(e):
            return None
        raise


def read_text(location: str, *, settings: StorageSettings | None = None) -> str | None:
    """The text of the file at `location`, or None when there is none."""
    data = read_bytes(location, settings=settings)
    return None if data is None else data.decode("utf-8")


def write_bytes(location: str, data: bytes, *, settings: StorageSettings | None = None) -> None:
    """Write `data` to `location` whole: readers see the old file or the new one (on a
    local disk: written, synced, then renamed into place)."""
    local = local_path(location)
    if local is not None:
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        tmp = f"{local}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, local)
        return
    fs, path = _fs(location, settings)
    with fs.open_output_stream(path) as f:
        f.write(data)


def write_text(location: str, text: str, *, settings: StorageSettings | None = None) -> None:
    write_bytes(location, text.encode("utf-8"), settings=settings)


def list_names(location: str, *, settings: StorageSettings | None = None) -> list[str]:
    """The names directly in the folder at `location` (files and folders; on object
    storage, folders that hold an object), sorted; empty when there is no such folder."""
    import pyarrow.fs as pafs

    fs, path = _fs(location, settings)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except NotADirectoryError:
        return []
    base = location.rstrip("/")
    return sorted(
        i.base_name
        for i in infos
        if i.type != pafs.FileType.Directory or _holds_object(f"{base}/{i.base_name}", settings)
    )


def walk_files(location: str, *, settings: StorageSettings | None = None) -> Iterator[str]:
    """Every file below the folder at `location`, as paths relative to it (`/`-separated)."""
    for rel, _ in walk_file_times(location, settings=settings):
        yield rel


def walk_file_times(
    location: str, *, settings: StorageSettings | None = None
) -> Iterator[tuple[str, float]]:
    """Every file below the folder at `location` with its modification time (seconds
    since the epoch; on object storage, when the object was written)."""
    import pyarrow.fs as pafs

    fs, path = _fs(location, settings)
    selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
    base = path.rstrip("/") + "/"
    for info in fs.get_file_info(selector):
        if info.type == pafs.FileType.File and info.path.startswith(base):
            mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
            yield info.path[len(base) :], mtime


def remove(location: str, *, settings: StorageSettings | None = None) -> bool:
    """Delete the file or the folder (with everything in it) at `location`; whether
    anything was there."""
    import pyarrow.fs as pafs

    fs, path = _fs(location, settings)
    kind = fs.get_file_info(path).type
    if kind == pafs.FileType.NotFound:
        return False
    if kind == pafs.FileType.Directory:
        # A store that keeps folders (directory markers, a file-system-backed server) can
        # still list one that the delete's parallel requests emptied, and a folder listed
        # a moment ago can be gone when its delete arrives: delete what is left, and a
        # folder already gone is deleted.
        for _ in range(3):
            try:
                fs.delete_dir(path)
            except FileNotFoundError:
                break
            if fs.get_file_info(path).type == pafs.FileType.NotFound:
                break
    else:
        try:
            fs.delete_file(path)
        except FileNotFoundError:
            pass
    return True


def size(location: str, *, settings: StorageSettings | None = None) -> int | None:
    """The size in bytes of the file at `location`, None when there is none."""
    info = _info(location, settings)
    return info.size if info.is_file else None
