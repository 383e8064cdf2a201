"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1–v3: the ACLs of the authorizer.

With `authorizer.class.name` set, the ACLs live in the broker's metadata log
(`streams.broker.security.authorizer.AclStore`) and these APIs manage them, as `kafka-acls`
and the Admin API use them: describing takes DESCRIBE on the cluster, creating and deleting
ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED. Without an authorizer they answer
as Kafka does: SECURITY_DISABLED with "No Authorizer is configured." for the request
(DescribeAcls), for each creation (CreateAcls) and for each filter (DeleteAcls).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from streams.broker.context import RequestContext
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
NO_AUTHORIZER = "No Authorizer is configured."
NOT_AUTHORIZED = "Cluster authorization failed."


def _refusal(ctx: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """Why this request may not touch ACLs (no authorizer, or not allowed), else None."""
    if ctx.broker.extension.authorizer is None:
        return ErrorCode.security_disabled, NO_AUTHORIZER
    if not ctx.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED
    return None


def _filter(f: Any) -> AclFilter:
    return AclFilter.of(
        rtype=int(f.resource_type_filter),
        name=f.resource_name_filter,
        ptype=int(f.pattern_type_filter),
        principal=f.principal_filter,
        host=f.host_filter,
        op=int(f.operation),
        perm=int(f.permission_type),
    )


def _resources(module: Any, bindings: list[AclBinding]) -> tuple[Any, ...]:
    """The bindings grouped by resource pattern, as Kafka's DescribeAclsResponse holds them."""
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in sorted(bindings):
        by_resource.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    return tuple(
        make(
            module.DescribeAclsResource,
            resource_type=i8(rtype),
            resource_name=name,
            pattern_type=i8(ptype),
            acls=tuple(
                make(
                    module.AclDescription,
                    principal=b.principal,
                    host=b.host,
                    operation=i8(b.operation),
                    permission_type=i8(b.permission),
                )
                for b in acls
            ),
        )
        for (rtype, name, ptype), acls in by_resource.items()
    )


async def describe_acls(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_ACLS, ctx.api_version)
    refused = _refusal(ctx, AclOperation.DESCRIBE)
    authorizer = ctx.broker.extension.authorizer
    bindings: list[AclBinding] = []
    if refused is None and authorizer is not None:
        wanted = _filter(request)
        if wanted.unknown_pattern or wanted.unknown_entry:
            refused = ErrorCode.invalid_request, "The filter holds an UNKNOWN element."
        else:
            bindings = [b for b in authorizer.acls if wanted.matches(b)]
    code, message = refused or (ErrorCode.none, "")  # Kafka's success: an empty message
    return make(
        module.DescribeAclsResponse,
        throttle_time=timedelta(0),
        error_code=code,
        error_message=message,
        resources=_resources(module, bindings),
    )


def _unparsable(creation: Any) -> bool:
    """An ACL creation Kafka's CreateAclsRequest cannot hold: a filter's ANY or MATCH, or a
    code it does not know, where a binding needs a definite resource type, pattern type,
    operation and permission."""
    binding = AclBinding.of(
        rtype=int(creation.resource_type),
        name=creation.resource_name,
        ptype=int(creation.resource_pattern_type),
        principal=creation.principal,
        host=creation.host,
        op=int(creation.operation),
        perm=int(creation.permission_type),
    )
    return (
        binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY)
        or binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)
        or binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY)
        or binding.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY)
    )


async def create_acls(ctx: RequestContext, request: Any) -> Any:
    module = response_module(CREATE_ACLS, ctx.api_version)
    refused = _refusal(ctx, AclOperation.ALTER)
    authorizer = ctx.broker.extension.authorizer
    if refused is not None or authorizer is None:
        code, message = refused or (ErrorCode.security_disabled, NO_AUTHORIZER)
        outcomes = [(code, message)] * len(request.creations)
    elif any(_unparsable(c) for c in request.creations):
        # Kafka cannot build the request's ACL bindings and fails it as a whole
        outcomes = [(ErrorCode.unknown_server_error, None)] * len(request.creations)
    else:
        bindings = [
            AclBinding.of(
                rtype=int(c.resource_type),
                name=c.resource_name,
                ptype=int(c.resource_pattern_type),
                principal=c.principal,
                host=c.host,
                op=int(c.operation),
                perm=int(c.permission_type),
            )
            for c in request.creations
        ]
        outcomes = authorizer.acls.create(bindings, now_ms=int(time.time() * 1000))
    results = tuple(
        make(module.AclCreationResult, error_code=code, error_message=message)
        for code, message in outcomes
    )
    return make(module.CreateAclsResponse, throttle_time=timedelta(0), results=results)


def _matching(module: Any, b: AclBinding) -> Any:
    return make(
        module.DeleteAclsMatchingAcl,
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=i8(b.resource_type),
        resource_name=b.name,
        pattern_type=i8(b.pattern_type),
        principal=b.principal,
        host=b.host,
        operation=i8(b.operation),
        permission_type=i8(b.permission),
    )


async def delete_acls(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DELETE_ACLS, ctx.api_version)
    refused = _refusal(ctx, AclOperation.ALTER)
    authorizer = ctx.broker.extension.authorizer
    if refused is not None or authorizer is None:
        code, message = refused or (ErrorCode.security_disabled, NO_AUTHORIZER)
        outcomes = [(code, message, [])] * len(request.filters)
    else:
        filters = [_filter(f) for f in request.filters]
        outcomes = authorizer.acls.delete(filters, now_ms=int(time.time() * 1000))
    results = tuple(
        make(
            module.DeleteAclsFilterResult,
            error_code=code,
            error_message=message,
            matching_acls=tuple(_matching(module, b) for b in sorted(deleted)),
        )
        for code, message, deleted in outcomes
    )
    return make(module.DeleteAclsResponse, throttle_time=timedelta(0), filter_results=results)


APIS = [
    (DESCRIBE_ACLS, (1, 3), describe_acls),
    (CREATE_ACLS, (1, 3), create_acls),
    (DELETE_ACLS, (1, 3), delete_acls),
]
