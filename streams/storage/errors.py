"""Errors of `streams.storage`: each names the location and what to do."""

from __future__ import annotations


class StorageError(Exception):
    """Root of the storage errors; `location` is what failed, when one did."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        super().__init__(message)
        self.location = location


class StorageConfigError(StorageError):
    """A location or setting this process cannot use (no client, a bad endpoint)."""


class LeaseLostError(StorageError):
    """A lease this process held was taken over by another process or could not be
    renewed in time: the work it guarded must stop."""


class LeaseUnsupportedError(StorageConfigError):
    """The store refuses conditional writes, so a lease cannot be held there."""
