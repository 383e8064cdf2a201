"""The ACL authorizer: Kafka's StandardAuthorizer semantics over ACLs kept durably.

Switched on with Kafka's settings: `authorizer.class.name` (Kafka's
`org.apache.kafka.metadata.authorizer.StandardAuthorizer`), `super.users`
(`User:alice;User:bob`, allowed everything) and `allow.everyone.if.no.acl.found` (default
false). A request is allowed when a super user makes it, or when an ALLOW ACL matches and
no DENY ACL does; an ACL matches a resource by literal name, the literal wildcard `*` or a
name prefix (PREFIXED), the principal by name or `User:*`, the host by address or `*`. An
ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, one of ALTER_CONFIGS implies
DESCRIBE_CONFIGS; ALL is every operation. With no ACL on the resource at all, the answer is
`allow.everyone.if.no.acl.found`.

`AclStore` keeps the ACLs by id and writes every change to the broker's metadata log
before applying it; CreateAcls, DescribeAcls and DeleteAcls answer from it with Kafka's
validation and words (its AclControlManager and AclApis).

Concurrency contract: not thread-safe; used from the broker's loop thread.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.config import ConfigError
from streams.broker.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from streams.broker.security.credentials import MetadataLog

logger = logging.getLogger(__name__)

__all__ = ["AclStore", "Authorizer", "authorizer_settings"]

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_KIND = "acl"
_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE}
    | {AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def authorizer_settings(raw: Mapping[str, str]) -> tuple[bool, frozenset[str], bool]:
    """(authorizer on, super users, allow.everyone.if.no.acl.found) from broker config."""
    name = raw.get("authorizer.class.name", "").strip()
    if name not in ("", STANDARD_AUTHORIZER):
        raise ConfigError(
            "authorizer.class.name", name, f"`{STANDARD_AUTHORIZER}` (or empty: no authorizer)"
        )
    supers = frozenset(u.strip() for u in raw.get("super.users", "").split(";") if u.strip())
    bad = sorted(u for u in supers if ":" not in u)
    if bad:
        raise ConfigError("super.users", raw["super.users"], "`User:name` entries separated by `;`")
    allow = raw.get("allow.everyone.if.no.acl.found", "false").strip().lower()
    if allow not in ("true", "false"):
        raise ConfigError("allow.everyone.if.no.acl.found", allow, "true or false")
    return bool(name), supers, allow == "true"


def _operation_matches(acl: AclBinding, operation: AclOperation) -> bool:
    if acl.operation in (AclOperation.ALL, operation):
        return True
    if acl.permission != AclPermissionType.ALLOW:
        return False  # a DENY of READ does not deny DESCRIBE
    if operation == AclOperation.DESCRIBE:
        return acl.operation in _IMPLIES_DESCRIBE
    return operation == AclOperation.DESCRIBE_CONFIGS and acl.operation in _IMPLIES_DESCRIBE_CONFIGS


class AclStore:
    """Every ACL by id, written to the metadata log before it is applied."""

    def __init__(self, log: MetadataLog) -> None:
        self._log = log
        self._acls: dict[str, AclBinding] = {}

    def load(self, records: Iterable[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        for key, value in records:
            if key.get("kind") != _KIND:
                continue
            if value is None:
                self._acls.pop(str(key["id"]), None)
                continue
            self._acls[str(key["id"])] = AclBinding(
                ResourceType[value["resource_type"]],
                value["name"],
                PatternType[value["pattern_type"]],
                value["principal"],
                value["host"],
                AclOperation[value["operation"]],
                AclPermissionType[value["permission"]],
            )

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._acls.values())

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        return [a for a in self._acls.values() if a.matches_resource(resource_type, name)]

    def create(
        self, bindings: list[AclBinding], *, now_ms: int
    ) -> list[tuple[ErrorCode, str | None]]:
        """Kafka's CreateAcls: each binding validated on its own; an ACL that exists already
        succeeds without a second copy. One write to the log for the request."""
        results: list[tuple[ErrorCode, str | None]] = []
        records: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        existing = set(self._acls.values())
        for binding in bindings:
            error = _creation_error(binding)
            if error is not None:
                results.append((ErrorCode.invalid_request, error))
                continue
            if binding not in existing:
                existing.add(binding)
                records.append(({"kind": _KIND, "id": uuid.uuid4().hex}, _value(binding)))
            results.append((ErrorCode.none, ""))  # Kafka's success: an empty message
        self._log.append(records, now_ms=now_ms)
        self.load(records)
        for binding in bindings:
            logger.info("ACL created: %s", binding)
        return results

    def delete(
        self, filters: list[AclFilter], *, now_ms: int
    ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        """Kafka's DeleteAcls: every ACL each filter matches goes (one write for them all)."""
        results: list[tuple[ErrorCode, str | None, list[AclBinding]]] = []
        doomed: dict[str, AclBinding] = {}
        for f in filters:
            if f.unknown_pattern:
                results.append((ErrorCode.invalid_request, "Unknown patternFilter.", []))
                continue
            if f.unknown_entry:
                results.append((ErrorCode.invalid_request, "Unknown entryFilter.", []))
                continue
            matched = {i: a for i, a in self._acls.items() if f.matches(a)}
            doomed.update(matched)
            results.append((ErrorCode.none, None, list(matched.values())))
        records: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
            ({"kind": _KIND, "id": i}, None) for i in doomed
        ]
        self._log.append(records, now_ms=now_ms)
        self.load(records)
        for binding in doomed.values():
            logger.info("ACL deleted: %s", binding)
        return results


def _creation_error(b: AclBinding) -> str | None:
    """Kafka's words for an ACL that cannot be created (the broker's checks, then the
    controller's), else None."""
    principal = (
        f"Could not parse principal from `{b.principal}` (no colon is present separating "
        "the principal type from the principal name)"
    )
    checks = (
        (
            b.resource_type == ResourceType.CLUSTER and b.name != CLUSTER_NAME,
            f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}",
        ),
        (not b.name, "Invalid empty resource name"),
        (b.resource_type in _NOT_CREATABLE, f"Invalid resourceType {b.resource_type.name}"),
        (b.pattern_type not in _CREATABLE_PATTERNS, f"Invalid patternType {b.pattern_type.name}"),
        (b.operation in _NOT_CREATABLE_OPS, f"Invalid operation {b.operation.name}"),
        (b.permission not in _PERMISSIONS, f"Invalid permissionType {b.permission.name}"),
        (":" not in b.principal, principal),
    )
    return next((message for failed, message in checks if failed), None)


_NOT_CREATABLE = (ResourceType.UNKNOWN, ResourceType.ANY)
_CREATABLE_PATTERNS = (PatternType.LITERAL, PatternType.PREFIXED)
_NOT_CREATABLE_OPS = (AclOperation.UNKNOWN, AclOperation.ANY)
_PERMISSIONS = (AclPermissionType.ALLOW, AclPermissionType.DENY)


def _value(b: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": b.resource_type.name,
        "name": b.name,
        "pattern_type": b.pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission": b.permission.name,
    }


class Authorizer:
    """Answers whether a principal from a host may do an operation on a resource."""

    def __init__(
        self, acls: AclStore, *, super_users: frozenset[str], allow_if_no_acl: bool
    ) -> None:
        self.acls = acls
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        found = self.acls.matching(resource_type, name)
        allowed = False
        for acl in found:
            if acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.host not in (WILDCARD, host) or not _operation_matches(acl, operation):
                continue
            if acl.permission == AclPermissionType.DENY:
                return False
            allowed = True
        if allowed:
            return True
        return not found and self.allow_if_no_acl

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may do `operation` on some resource of the type (Kafka's
        `authorizeByResourceType`: an idempotent producer may start with WRITE on any topic):
        an ALLOW ACL for it that a DENY of every resource (`*`) does not cancel."""
        if principal in self.super_users:
            return True
        acls = [a for a in self.acls if a.resource_type == resource_type]
        if not acls:
            return self.allow_if_no_acl
        mine = [
            a
            for a in acls
            if a.principal in (principal, WILDCARD_PRINCIPAL)
            and a.host in (WILDCARD, host)
            and a.operation in (AclOperation.ALL, operation)
        ]
        if any(
            a.permission == AclPermissionType.DENY
            and a.pattern_type == PatternType.LITERAL
            and a.name == WILDCARD
            for a in mine
        ):
            return False
        return any(a.permission == AclPermissionType.ALLOW for a in mine)
