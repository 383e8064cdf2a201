"""Locations as text: a local path or a URI (`s3://`, `s3a://`, `abfss://`, `gs://`, `hdfs://`).

A location travels as a string through every layer and into Spark, which reads URIs
itself; only this package turns one into a file system and a path on it. `s3://` and
`s3a://` name the same objects (Hadoop's connector is `s3a`, the Python clients' `s3`).
Plain string arithmetic, no I/O.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
"""Schemes that name an object in an S3 bucket (Hadoop's connectors and the AWS CLI's)."""
OBJECT_STORE_SCHEMES = S3_SCHEMES | {"gs", "abfss", "abfs", "az", "azure"}
"""Schemes of object stores, where a folder is a key prefix (`hdfs://` keeps real folders)."""


def scheme(location: str) -> str:
    """The URI scheme of `location` (lower-case), or `file` for a plain path."""
    if "://" not in location:
        return "file"
    return location.split("://", 1)[0].lower()


def is_local(location: str) -> bool:
    """Whether `location` is on the local file system (a path or a `file:` URI)."""
    return scheme(location) == "file"


def is_s3(location: str) -> bool:
    return scheme(location) in S3_SCHEMES


def local_path(location: str) -> str | None:
    """The local file system path of `location`, or None for any other scheme."""
    if "://" not in location:
        return os.path.abspath(location)
    parsed = urlparse(location)
    if parsed.scheme.lower() == "file" and parsed.netloc in ("", "localhost"):
        return unquote(parsed.path).rstrip("/") or "/"
    return None


def join(location: str, *parts: str) -> str:
    """`location` with `parts` appended, `/`-separated (a local path stays a path)."""
    out = location.rstrip("/") if location not in ("/",) else location
    for p in parts:
        p = p.strip("/")
        if p:
            out = f"{out}/{p}" if not out.endswith("/") else f"{out}{p}"
    return out


def parent(location: str) -> str:
    """The location `location` is in (`s3://b/w/t` -> `s3://b/w`)."""
    head, _, _ = location.rstrip("/").rpartition("/")
    if head.endswith(":/") or head.endswith(":"):  # the bucket itself
        return location.rstrip("/")
    return head or "/"


def name(location: str) -> str:
    """The last part of `location` (`s3://b/w/t` -> `t`)."""
    return location.rstrip("/").rpartition("/")[2]


def resolve(location: str, base_dir: str) -> str:
    """An absolute location: a URI as written (without a trailing `/`), a `file:` URI as
    its path, a relative path against `base_dir`."""
    if is_local(location):
        path = local_path(location) if "://" in location else location
        path = os.path.expanduser(path or "")
        full = path if os.path.isabs(path) else os.path.join(base_dir, path)
        return os.path.abspath(full)
    return location.rstrip("/")


def bucket_key(location: str) -> tuple[str, str]:
    """`s3a://bucket/a/b` -> (`bucket`, `a/b`): the authority and the key below it."""
    parsed = urlparse(location)
    return parsed.netloc, unquote(parsed.path).lstrip("/")
