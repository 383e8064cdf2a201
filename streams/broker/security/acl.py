"""Kafka's ACL model: resource types, pattern types, operations, permissions (with Kafka's
codes), an ACL binding, and the filters DescribeAcls and DeleteAcls match bindings with.

Names and codes are Kafka's (`org.apache.kafka.common.resource`, `...common.acl`); a
binding is `(resource type, resource name, pattern type, principal, host, operation,
permission)`, e.g. `(TOPIC, "orders-", PREFIXED, "User:bob", "*", READ, ALLOW)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "AclBinding",
    "AclFilter",
    "AclOperation",
    "AclPermissionType",
    "CLUSTER_NAME",
    "PatternType",
    "ResourceType",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
]

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _member(enum: type[IntEnum], value: int) -> IntEnum:
    try:
        return enum(value)
    except ValueError:
        return enum(0)  # UNKNOWN, as Kafka reads a code it does not know


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(
        cls, *, rtype: int, name: str, ptype: int, principal: str, host: str, op: int, perm: int
    ) -> AclBinding:
        """A binding from a request's codes; a code Kafka does not know reads as UNKNOWN."""
        return cls(
            ResourceType(_member(ResourceType, rtype)),
            name,
            PatternType(_member(PatternType, ptype)),
            principal,
            host,
            AclOperation(_member(AclOperation, op)),
            AclPermissionType(_member(AclPermissionType, perm)),
        )

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL's resource pattern covers resource `name` of `resource_type`."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.name)


@dataclass(frozen=True)
class AclFilter:
    """Kafka's AclBindingFilter: None and the ANY codes match everything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(
        cls,
        *,
        rtype: int,
        name: str | None,
        ptype: int,
        principal: str | None,
        host: str | None,
        op: int,
        perm: int,
    ) -> AclFilter:
        return cls(
            ResourceType(_member(ResourceType, rtype)),
            name,
            PatternType(_member(PatternType, ptype)),
            principal,
            host,
            AclOperation(_member(AclOperation, op)),
            AclPermissionType(_member(AclPermissionType, perm)),
        )

    @property
    def unknown_pattern(self) -> bool:
        return ResourceType.UNKNOWN in (self.resource_type,) or self.pattern_type == 0

    @property
    def unknown_entry(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission == 0

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            return acl.matches_resource(acl.resource_type, self.name)
        if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.name is None or self.name == acl.name

    def matches(self, acl: AclBinding) -> bool:
        return (
            self._pattern_matches(acl)
            and self.principal in (None, acl.principal)
            and self.host in (None, acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission in (AclPermissionType.ANY, acl.permission)
        )
