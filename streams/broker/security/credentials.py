"""SCRAM credentials, kept as Kafka keeps them: salt, iterations, StoredKey, ServerKey.

`ScramCredentialStore` holds them in memory and writes every change to the broker's
metadata log (an internal compacted topic, `MetadataLog`) before it applies it; the store
replays that log at start. `alter` and `describe` answer AlterUserScramCredentials and
DescribeUserScramCredentials with Kafka's rules and words (its ScramControlManager and
ScramImage): one change per user and request, 4096..16384 iterations, RESOURCE_NOT_FOUND
for a credential that does not exist.

Concurrency contract: not thread-safe; used from the broker's loop thread.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from streams.broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    ScramCredential,
    credential_from_salted_password,
    mechanism_by_type,
)

logger = logging.getLogger(__name__)

__all__ = ["MetadataLog", "ScramCredentialStore", "ScramDeletion", "ScramUpsertion"]

_KIND = "scram"
_DUPLICATE = "A user credential cannot be altered twice in the same request"
_DESCRIBE_DUPLICATE = (
    "Cannot describe SCRAM credentials for the same user twice in a single request: "
)
_DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "


class MetadataLog(Protocol):
    """An internal compacted topic of JSON keys and values (the coordinator's InternalLog)."""

    def append(
        self, records: list[tuple[dict[str, Any], dict[str, Any] | None]], *, now_ms: int
    ) -> None: ...

    def replay(self) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]: ...


@dataclass(frozen=True)
class ScramDeletion:
    user: str
    mechanism: int


@dataclass(frozen=True)
class ScramUpsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


Result = tuple[str, ErrorCode, str | None]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramCredentialStore:
    """Every user's SCRAM credentials, by (user, mechanism name)."""

    def __init__(self, log: MetadataLog) -> None:
        self._log = log
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def load(self, records: Iterable[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        """Apply this store's records of a replayed metadata log."""
        for key, value in records:
            if key.get("kind") != _KIND:
                continue
            slot = (str(key["user"]), str(key["mechanism"]))
            if value is None:
                self._credentials.pop(slot, None)
                continue
            self._credentials[slot] = ScramCredential(
                salt=base64.b64decode(value["salt"]),
                stored_key=base64.b64decode(value["stored_key"]),
                server_key=base64.b64decode(value["server_key"]),
                iterations=int(value["iterations"]),
            )

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def users(self) -> set[str]:
        return {user for user, _ in self._credentials}

    # -- AlterUserScramCredentials ---------------------------------------------------
    def alter(
        self,
        deletions: Iterable[ScramDeletion],
        upsertions: Iterable[ScramUpsertion],
        *,
        now_ms: int,
    ) -> list[Result]:
        """Apply the request's valid changes (one write to the log) and answer every user."""
        errors: dict[str, tuple[ErrorCode, str | None]] = {}
        deleting: dict[str, ScramDeletion] = {}
        upserting: dict[str, ScramUpsertion] = {}
        for deletion in deletions:
            self._admit(deletion, deleting, {}, errors, self._deletion_error(deletion))
        for upsertion in upsertions:
            self._admit(upsertion, deleting, upserting, errors, _upsertion_error(upsertion))
        records: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        for d in deleting.values():
            records.append((_key(d.user, d.mechanism), None))
        for u in upserting.values():
            records.append((_key(u.user, u.mechanism), _value(u)))
        self._log.append(records, now_ms=now_ms)
        self.load(records)
        for user in [*deleting, *upserting]:
            logger.info("SCRAM credentials of user %s changed", user)
        results: list[Result] = [(user, ErrorCode.none, None) for user in [*deleting, *upserting]]
        results += [(user, code, message) for user, (code, message) in errors.items()]
        return results

    @staticmethod
    def _admit(
        change: ScramDeletion | ScramUpsertion,
        deleting: dict[str, ScramDeletion],
        upserting: dict[str, ScramUpsertion],
        errors: dict[str, tuple[ErrorCode, str | None]],
        error: tuple[ErrorCode, str] | None,
    ) -> None:
        """Kafka's rule: a user named twice in one request gets DUPLICATE_RESOURCE and
        none of its changes is applied."""
        user = change.user
        if user in errors:
            return
        if deleting.pop(user, None) is not None or upserting.pop(user, None) is not None:
            errors[user] = (ErrorCode.duplicate_resource, _DUPLICATE)
        elif error is not None:
            errors[user] = error
        elif isinstance(change, ScramDeletion):
            deleting[user] = change
        else:
            upserting[user] = change

    def _deletion_error(self, deletion: ScramDeletion) -> tuple[ErrorCode, str] | None:
        error = _name_error(deletion.user, deletion.mechanism)
        if error is not None:
            return error
        mechanism = mechanism_by_type(deletion.mechanism)
        assert mechanism is not None
        if (deletion.user, mechanism.name) not in self._credentials:
            return (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        return None

    # -- DescribeUserScramCredentials ----------------------------------------------
    def describe(
        self, users: Iterable[str] | None
    ) -> list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]]:
        """(user, error, message, [(mechanism type, iterations)]) per user asked for, or
        per user with a credential when none is named."""
        named = list(users or ())
        counts: dict[str, int] = {}
        for user in named or sorted(self.users()):
            counts[user] = counts.get(user, 0) + 1
        out = []
        for user, count in counts.items():
            if count > 1:
                out.append((user, ErrorCode.duplicate_resource, _DESCRIBE_DUPLICATE + user, []))
                continue
            infos = [
                (m.type, cred.iterations)
                for m in MECHANISMS.values()
                if (cred := self._credentials.get((user, m.name))) is not None
            ]
            if infos:
                out.append((user, ErrorCode.none, "", infos))  # Kafka's default: empty
            else:
                out.append((user, ErrorCode.resource_not_found, _DESCRIBE_MISSING + user, []))
        return out


def _name_error(user: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism_by_type(mechanism) is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def _upsertion_error(upsertion: ScramUpsertion) -> tuple[ErrorCode, str] | None:
    error = _name_error(upsertion.user, upsertion.mechanism)
    if error is not None:
        return error
    mechanism = mechanism_by_type(upsertion.mechanism)
    assert mechanism is not None
    if upsertion.iterations < mechanism.min_iterations:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


def _key(user: str, mechanism_type: int) -> dict[str, Any]:
    mechanism = mechanism_by_type(mechanism_type)
    assert mechanism is not None
    return {"kind": _KIND, "user": user, "mechanism": mechanism.name}


def _value(upsertion: ScramUpsertion) -> dict[str, Any]:
    mechanism = mechanism_by_type(upsertion.mechanism)
    assert mechanism is not None
    credential = credential_from_salted_password(
        mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
    )
    return {
        "salt": _b64(credential.salt),
        "stored_key": _b64(credential.stored_key),
        "server_key": _b64(credential.server_key),
        "iterations": credential.iterations,
    }
