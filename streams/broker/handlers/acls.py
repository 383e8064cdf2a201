"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1–v3: a broker without an authorizer.

This broker authenticates (optional SASL/PLAIN) but does not authorize, so it
answers the ACL APIs as Kafka does when no `authorizer.class.name` is set:
SECURITY_DISABLED with "No Authorizer is configured." for the request
(DescribeAcls), for each creation (CreateAcls) and for each filter (DeleteAcls).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.protocol import make, response_module

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
NO_AUTHORIZER = "No Authorizer is configured."


async def describe_acls(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_ACLS, ctx.api_version)
    return make(
        module.DescribeAclsResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode.security_disabled,
        error_message=NO_AUTHORIZER,
        resources=(),
    )


async def create_acls(ctx: RequestContext, request: Any) -> Any:
    module = response_module(CREATE_ACLS, ctx.api_version)
    results = tuple(
        make(
            module.AclCreationResult,
            error_code=ErrorCode.security_disabled,
            error_message=NO_AUTHORIZER,
        )
        for _ in request.creations
    )
    return make(module.CreateAclsResponse, throttle_time=timedelta(0), results=results)


async def delete_acls(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DELETE_ACLS, ctx.api_version)
    results = tuple(
        make(
            module.DeleteAclsFilterResult,
            error_code=ErrorCode.security_disabled,
            error_message=NO_AUTHORIZER,
            matching_acls=(),
        )
        for _ in request.filters
    )
    return make(module.DeleteAclsResponse, throttle_time=timedelta(0), filter_results=results)


APIS = [
    (DESCRIBE_ACLS, (1, 3), describe_acls),
    (CREATE_ACLS, (1, 3), create_acls),
    (DELETE_ACLS, (1, 3), delete_acls),
]
