"""How this process reaches object storage: the standard variables, and what they cannot say.

Credentials, region and endpoint come from the variables every AWS client reads
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
`AWS_ENDPOINT_URL`), and the client libraries read the credentials themselves, in this
process and in Spark's Python workers alike. What the framework adds derives from them:
plain HTTP when the endpoint says `http://`, path-style addressing for a custom endpoint,
and the same settings in Hadoop's names for a session it starts. A project's `storage:`
section (`StorageSettings`) says what the variables cannot: an endpoint or region of its
own, more object-store options (delta-rs and obstore take them, `aws_*`, `azure_*`,
`google_*`) and Hadoop properties (`fs.s3a.*`, `fs.azure.*`, `fs.gs.*`).

`configure(overrides)` makes a project's section this process's (the `Project` facade
does when it loads one) and exports it in `SETTINGS_VARIABLE`, so that the processes this
one starts afterwards (Spark's JVM, and the Python workers it starts) use the same;
`current()`, what every storage call uses, reads the standard variables at each call
and puts the section over them. Spark's executors on other machines never see this
process's environment: work sent to their tasks carries `overrides()` and runs under
`configured` with it. Values of `options` and `hadoop` may be secrets: they
are never logged, and `repr` shows their names only.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streams.storage.errors import StorageConfigError
from streams.storage.location import S3_SCHEMES, bucket_key, is_local, local_path, scheme

if TYPE_CHECKING:
    import pyarrow.fs as pafs

ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3A_CONTEXT = "org.apache.hadoop.fs.s3a.S3A"

DEFAULT_LEASE_SECONDS = 60.0
"""How long a table's lease on object storage holds without renewal (`streams.storage.lease`)."""


@dataclass(frozen=True, repr=False)
class StorageSettings:
    """Resolved settings for object storage (see module doc). Immutable; picklable."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool | None = None
    """None: path-style with a custom endpoint (S3-compatible servers), virtual-hosted
    on AWS itself."""
    options: Mapping[str, str] = field(default_factory=dict)
    hadoop: Mapping[str, str] = field(default_factory=dict)
    lease_seconds: float = DEFAULT_LEASE_SECONDS

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str],
        *,
        endpoint: str | None = None,
        region: str | None = None,
        path_style: bool | None = None,
        options: Mapping[str, str] | None = None,
        hadoop: Mapping[str, str] | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> StorageSettings:
        """The settings of `environ`'s standard variables, overridden by those given."""
        found_endpoint = next((environ[v] for v in ENDPOINT_VARIABLES if environ.get(v)), None)
        found_region = next((environ[v] for v in REGION_VARIABLES if environ.get(v)), None)
        end = endpoint or found_endpoint
        if end is not None and not end.startswith(("http://", "https://")):
            raise StorageConfigError(
                f"The object-storage endpoint `{end}` has no scheme; write it as "
                "`http://host:port` or `https://host` (`storage.endpoint` or "
                "`AWS_ENDPOINT_URL`)."
            )
        return cls(
            endpoint=end,
            region=region or found_region,
            path_style=path_style,
            options=dict(options or {}),
            hadoop=dict(hadoop or {}),
            lease_seconds=lease_seconds,
        )

    @property
    def uses_path_style(self) -> bool:
        return self.path_style if self.path_style is not None else self.endpoint is not None

    @property
    def plain_http(self) -> bool:
        return bool(self.endpoint and self.endpoint.startswith("http://"))

    def object_store_options(self, location: str) -> dict[str, str] | None:
        """delta-rs's `storage_options` for a table at `location` (None: a local table,
        or nothing to add to what the client reads from the environment)."""
        if is_local(location):
            return None
        opts: dict[str, str] = {}
        if scheme(location) in S3_SCHEMES:
            if self.endpoint:
                opts["AWS_ENDPOINT_URL"] = self.endpoint
            if self.region:
                opts["AWS_REGION"] = self.region
            if self.plain_http:
                opts["AWS_ALLOW_HTTP"] = "true"
            if not self.uses_path_style:
                opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "true"
        opts.update(self.options)
        return opts or None

    def hadoop_conf(self) -> dict[str, str]:
        """Spark settings (`spark.hadoop.*`) that give Hadoop's S3 connector the same
        endpoint, region and addressing, make `s3://` mean `s3a://`, and add `hadoop`."""
        conf = {
            "fs.s3.impl": S3A_FILESYSTEM,
            "fs.AbstractFileSystem.s3.impl": S3A_CONTEXT,
        }
        if self.endpoint:
            conf["fs.s3a.endpoint"] = self.endpoint
            conf["fs.s3a.connection.ssl.enabled"] = "false" if self.plain_http else "true"
        if self.region:
            conf["fs.s3a.endpoint.region"] = self.region
        conf["fs.s3a.path.style.access"] = "true" if self.uses_path_style else "false"
        conf.update(self.hadoop)
        return {f"spark.hadoop.{k}": v for k, v in conf.items()}

    def filesystem(self, location: str) -> tuple[pafs.FileSystem, str]:
        """A pyarrow file system for `location` and the path of `location` on it."""
        import pyarrow as pa
        import pyarrow.fs as pafs

        local = local_path(location)
        if local is not None:
            return pafs.LocalFileSystem(), local
        if scheme(location) in S3_SCHEMES:
            bucket, key = bucket_key(location)
            return _s3(self), f"{bucket}/{key}".rstrip("/")
        try:
            return pafs.FileSystem.from_uri(location)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
            raise StorageConfigError(
                f"No file system for `{location}`: {e}. Local paths, `s3://`/`s3a://`, "
                "`gs://`, `abfss://` and `hdfs://` are supported where pyarrow has their "
                "client (and credentials) in this environment."
            ) from e

    def __repr__(self) -> str:
        return (
            f"StorageSettings(endpoint={self.endpoint!r}, region={self.region!r}, "
            f"path_style={self.path_style!r}, options={sorted(self.options)}, "
            f"hadoop={sorted(self.hadoop)}, lease_seconds={self.lease_seconds})"
        )


_PYARROW_KEYS = {
    "aws_access_key_id": "access_key",
    "aws_secret_access_key": "secret_key",
    "aws_session_token": "session_token",
}


def _s3(settings: StorageSettings) -> Any:
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {}
    for key, value in settings.options.items():
        arg = _PYARROW_KEYS.get(key.lower())
        if arg:
            kwargs[arg] = value
    if settings.endpoint:
        kwargs["endpoint_override"] = settings.endpoint
    return pafs.S3FileSystem(
        region=settings.region,
        force_virtual_addressing=not settings.uses_path_style,
        **kwargs,
    )


SETTINGS_VARIABLE = "WAREHOUSE_STORAGE_SETTINGS"
"""The environment variable `configure` exports the settings in (JSON), for child processes."""

_configured: dict[str, Any] | None = None
_lock = threading.Lock()


def configure(overrides: Mapping[str, Any] | None) -> None:
    """Put `overrides` (`StorageSettings.from_environ`'s keywords: a project's `storage:`
    section) over the standard variables in this process and its children; None or
    empty: the standard variables alone."""
    global _configured
    with _lock:
        _configured = dict(overrides or {})
        if _configured:
            os.environ[SETTINGS_VARIABLE] = json.dumps(_configured)
        else:
            os.environ.pop(SETTINGS_VARIABLE, None)


@contextmanager
def configured(section: Mapping[str, Any] | None) -> Iterator[None]:
    """`configure(section)` for the `with` block, then this process's settings as they
    were: a Spark task's, in a Python worker that runs other work after it."""
    global _configured
    with _lock:
        previous, exported = _configured, os.environ.get(SETTINGS_VARIABLE)
    configure(section)
    try:
        yield
    finally:
        with _lock:
            _configured = previous
            if exported is None:
                os.environ.pop(SETTINGS_VARIABLE, None)
            else:
                os.environ[SETTINGS_VARIABLE] = exported


def overrides() -> dict[str, Any]:
    """The section `configure` set in this process (or in a parent process) to put over
    the standard variables; empty for none. Spark's tasks run elsewhere get it with their
    work and run under `configured(it)` (values may be secrets: never log it)."""
    configured = _configured
    if configured is not None:
        return dict(configured)
    exported = os.environ.get(SETTINGS_VARIABLE)
    try:
        return json.loads(exported) if exported else {}
    except ValueError as e:
        raise StorageConfigError(
            f"`{SETTINGS_VARIABLE}` does not hold storage settings ({e}); unset it."
        ) from e


def current() -> StorageSettings:
    """This process's storage settings: the standard variables as they are now, with the
    section `configure` set here (or in a parent process) over them."""
    return StorageSettings.from_environ(os.environ, **overrides())
