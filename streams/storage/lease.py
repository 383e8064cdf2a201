"""One process at a time on a name on object storage: a lease renewed while held.

Object stores have no `flock`, but they create an object only if it is absent
(`If-None-Match: *`, a conditional put: S3 since 2024, GCS and Azure always), which
is the one atomic step this lease needs. The lease at `<location>` is a folder of
generations, `<location>/<generation>.json`, each holding its holder's record (pid,
host, command, what it does and since when):

- **acquire**: list the generations. When the newest was written within the lease
  time (`StorageSettings.lease_seconds`, judged by the store's `Last-Modified` against
  this host's clock), its holder has it: refused, naming the holder. Otherwise create
  the next generation, only if absent: of two processes racing for it, one creates it
  and the other is refused. Older generations are deleted.
- **renew**: a thread writes the holder's own generation again every quarter of the
  lease time, which only its holder writes. Before each write it lists the generations:
  a newer one means the lease expired (the holder stalled past the lease time) and
  another process took it; so does failing to renew for a whole lease time. Either
  way the lease is *lost*: `lost` is set and `on_lost` called once, and the holder must
  stop writing what the lease guards.
- **release**: stop renewing and delete the holder's generation.

A holder that dies (SIGKILL, a lost machine) stops renewing, and its lease expires
after the lease time; the next process then takes it. Clocks of the hosts and of the
store must agree to well within the lease time.

Concurrency: `acquire` and `release` are called from one thread; the renewal runs in a
daemon thread of its own and only sets `lost` and calls `on_lost`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from streams.storage.errors import (
    LeaseLostError,
    LeaseUnsupportedError,
    StorageConfigError,
    StorageError,
)
from streams.storage.location import OBJECT_STORE_SCHEMES, S3_SCHEMES, bucket_key, scheme
from streams.storage.settings import StorageSettings, current

logger = logging.getLogger(__name__)

_SUFFIX = ".json"


@dataclass(frozen=True)
class Generation:
    number: int
    key: str
    modified: datetime


def object_store(location: str, settings: StorageSettings) -> tuple[Any, str]:
    """An obstore store for the bucket (container) of `location`, and the key prefix of
    `location` in it."""
    from obstore.store import from_url

    kind = scheme(location)
    bucket, key = bucket_key(location)
    opts = settings.object_store_options(location) or {}
    client: dict[str, Any] = {}
    config: dict[str, str] = {}
    for k, v in opts.items():
        if k.upper() == "AWS_ALLOW_HTTP":
            client["allow_http"] = v.lower() == "true"
        else:
            config[k.lower()] = v
    if kind in S3_SCHEMES:
        url = f"s3://{bucket}"
    elif kind in OBJECT_STORE_SCHEMES:
        url = location[: len(location) - len(key)].rstrip("/")
    else:
        raise StorageConfigError(
            f"`{location}`: a lease needs an object store with conditional writes "
            "(`s3://`, `s3a://`, `gs://`, `abfss://`).",
            location=location,
        )
    return from_url(url, config=config or None, client_options=client or None), key.rstrip("/")


class Lease:
    """An exclusive lease on `location` (see module doc)."""

    def __init__(
        self,
        location: str,
        record: Mapping[str, Any],
        *,
        settings: StorageSettings | None = None,
        on_lost: Callable[[LeaseLostError], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.location = location.rstrip("/")
        self.settings = settings or current()
        self.seconds = self.settings.lease_seconds
        self.record = {**record, "owner": uuid.uuid4().hex}
        self.on_lost = on_lost
        self.clock = clock
        self.lost = False
        self._store, self._prefix = object_store(self.location, self.settings)
        self._mine: Generation | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def generations(self) -> list[Generation]:
        """The lease's generations, oldest first."""
        import obstore

        found = []
        for chunk in obstore.list(self._store, self._prefix + "/"):
            for meta in chunk:
                name = meta["path"].rpartition("/")[2]
                stem = name.removesuffix(_SUFFIX)
                if name.endswith(_SUFFIX) and stem.isdigit():
                    found.append(Generation(int(stem), meta["path"], meta["last_modified"]))
        return sorted(found, key=lambda g: g.number)

    def _live(self, g: Generation) -> bool:
        return self.clock() - g.modified.timestamp() < self.seconds

    def holder(self, g: Generation) -> dict[str, Any]:
        """The record of generation `g` ({} when it is gone or unreadable)."""
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            return json.loads(bytes(obstore.get(self._store, g.key).bytes()))
        except (NotFoundError, ValueError):
            return {}

    def acquire(self) -> dict[str, Any] | None:
        """Take the lease and start renewing it: None when taken, else the record of the
        process that holds it (with `renewed_seconds_ago`). Raises `LeaseUnsupportedError`
        where the store refuses conditional writes, `StorageError` where it cannot be
        reached."""
        from obstore.exceptions import BaseError, NotSupportedError

        try:
            return self._acquire()
        except NotSupportedError as e:
            raise self._unsupported(e) from e
        except BaseError as e:
            if "501" in str(e) or "NotImplemented" in str(e):
                raise self._unsupported(e) from e
            raise StorageError(
                f"Cannot take the lease at `{self.location}`: {e}. Check that the bucket "
                "exists and the credentials (`AWS_ACCESS_KEY_ID`, ...) may write it.",
                location=self.location,
            ) from e

    def _unsupported(self, e: Exception) -> LeaseUnsupportedError:
        return LeaseUnsupportedError(
            f"The store of `{self.location}` refuses conditional writes ({e}), so no "
            "lease can keep a second process off this table.",
            location=self.location,
        )

    def _acquire(self) -> dict[str, Any] | None:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        gens = self.generations()
        newest = gens[-1] if gens else None
        if newest is not None and self._live(newest):
            return self._busy(newest)
        number = newest.number + 1 if newest else 1
        key = f"{self._prefix}/{number:012d}{_SUFFIX}"
        try:
            obstore.put(self._store, key, self._payload(), mode="create")
        except (AlreadyExistsError, PreconditionError):
            raced = [g for g in self.generations() if g.number >= number]
            return self._busy(raced[-1]) if raced else {"pid": "?", "renewed_seconds_ago": 0}
        self._mine = Generation(number, key, datetime.now(UTC))
        for g in gens:
            obstore.delete(self._store, g.key)
        self._thread = threading.Thread(
            target=self._renew_loop, name=f"lease {self.location}", daemon=True
        )
        self._thread.start()
        logger.debug("lease %s: generation %d taken", self.location, number)
        return None

    def _busy(self, g: Generation) -> dict[str, Any]:
        rec = self.holder(g)
        return {**rec, "renewed_seconds_ago": round(self.clock() - g.modified.timestamp(), 1)}

    def _payload(self) -> bytes:
        renewed = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return json.dumps({**self.record, "renewed": renewed}).encode()

    def _renew_loop(self) -> None:
        from obstore.exceptions import BaseError

        last_ok = time.monotonic()
        while not self._stop.wait(self.seconds / 4):
            try:
                newer = [g for g in self.generations() if g.number > self._mine.number]  # type: ignore[union-attr]
                if newer:
                    self._lose(f"another process took it (generation {newer[-1].number})")
                    return
                self._write_mine()
                last_ok = time.monotonic()
            except BaseError as e:  # the store may be away for a while
                logger.warning("lease %s: renewal failed (%s); retrying", self.location, e)
                if time.monotonic() - last_ok >= self.seconds:
                    self._lose(f"not renewed for {self.seconds:g} s ({e})")
                    return

    def _write_mine(self) -> None:
        import obstore

        obstore.put(self._store, self._mine.key, self._payload())  # type: ignore[union-attr]

    def _lose(self, why: str) -> None:
        self.lost = True
        error = LeaseLostError(
            f"The lease on `{self.location}` was lost: {why}. The work it guarded stops; "
            "start it again once the other process is done.",
            location=self.location,
        )
        logger.error("%s", error)
        if self.on_lost is not None:
            self.on_lost(error)

    def release(self) -> None:
        """Stop renewing and give the lease up."""
        import obstore
        from obstore.exceptions import BaseError

        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._mine is not None and not self.lost:
            try:
                obstore.delete(self._store, self._mine.key)
            except BaseError as e:  # it expires by itself
                logger.warning("lease %s: not released (%s); it expires", self.location, e)
        self._mine = None
