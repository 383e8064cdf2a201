"""DescribeClientQuotas (48), v0–v1: this broker enforces no client quotas, so it has none
to describe; every filter matches nothing.

`kafka-configs --describe --entity-type users` asks it before it describes a user's SCRAM
credentials, so the tool needs an answer.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

DESCRIBE_CLIENT_QUOTAS = 48


async def describe_client_quotas(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_CLIENT_QUOTAS, ctx.api_version)
    if not ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return make(
            module.DescribeClientQuotasResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.cluster_authorization_failed,
            error_message="Cluster authorization failed.",
            entries=None,
        )
    return make(
        module.DescribeClientQuotasResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        entries=(),
    )


APIS = [(DESCRIBE_CLIENT_QUOTAS, (0, 1), describe_client_quotas)]
