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


def write_bytes(
    location: str,
    data: bytes,
    *,
    settings: StorageSettings | None = None,
    durable: bool = True,
) -> None:
    """Write `data` to `location` whole: readers see the old file or the new one (on a
    local disk: written, synced, then renamed into place). `durable=False` skips the sync
    on a local disk, for a record that only says what a running process is doing: a crash
    of the machine may leave the older record (or, on a file system that does not order a
    rename after the data, an empty file), never a torn one."""
    local = local_path(location)
    if local is not None:
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        tmp = f"{local}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, local)
        return
    fs, path = _fs(location, settings)
    with fs.open_output_stream(path) as f:
        f.write(data)


def write_text(
    location: str,
    text: str,
    *,
    settings: StorageSettings | None = None,
    durable: bool = True,
) -> None:
    write_bytes(location, text.encode("utf-8"), settings=settings, durable=durable)


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
    if kind == pafs.FileType.Directory and scheme(location) in OBJECT_STORE_SCHEMES:
        _remove_prefix(location, fs, path, settings)
    elif kind == pafs.FileType.Directory:
        fs.delete_dir(path)
    else:
        try:
            fs.delete_file(path)
        except FileNotFoundError:
            pass
    return True


def _remove_prefix(
    location: str, fs: pafs.FileSystem, path: str, settings: StorageSettings | None
) -> None:
    """Delete every object under the folder at `location` on an object store: the files in
    one bulk delete, then the folders' markers one by one, the deepest first.

    Folders on a store are marker objects (`a/b/`, written by Hadoop's S3A for every folder
    it makes) or, on a store backed by a file system (S3Proxy's), directories. pyarrow's
    `delete_dir` deletes a tree's objects in parallel requests, and where a marker's
    delete reaches such a store before the delete of the last file under it, the
    directory outlives both, listed as a folder with nothing in it, which no request
    removes and which Spark's S3A then finds (a state store location "not empty"). In
    this order every folder is empty when its marker is deleted. pyarrow's deletes of a
    marker (the only client here that names a key ending in `/`) also write a marker for
    the parent when it is left empty, as a file system's folder would stay; the parent is
    outside the removed folder."""
    import obstore
    import pyarrow.fs as pafs

    from streams.storage.lease import object_store

    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    files = [i.path for i in infos if i.type == pafs.FileType.File]
    folders = sorted(
        (i.path for i in infos if i.type == pafs.FileType.Directory),
        key=lambda p: (-p.count("/"), p),
    )
    if files:
        store, key = object_store(location, settings or current())
        base = path.rstrip("/")
        prefix = key.rstrip("/")
        keys = sorted((prefix + f[len(base) :] for f in files), key=lambda k: -k.count("/"))
        obstore.delete(store, keys)
    for folder in [*folders, path]:
        try:
            fs.delete_dir(folder)
        except FileNotFoundError:
            pass


def size(location: str, *, settings: StorageSettings | None = None) -> int | None:
    """The size in bytes of the file at `location`, None when there is none."""
    info = _info(location, settings)
    return info.size if info.is_file else None
