"""ApiVersions (key 18), v0–v4: the APIs and versions this broker implements.

v4 (KIP-1073) differs from v3 only in what a broker may put in
`supported_features`, which this broker leaves empty; a version above 4 gets
UNSUPPORTED_VERSION in v0 format with the supported list, as Kafka answers.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import BrokerContext, RequestContext
from streams.broker.protocol import encode_response, make, response_module

API_KEY = 18


def _api_keys(broker: BrokerContext, version: int) -> tuple[Any, ...]:
    cls = response_module(API_KEY, version).ApiVersion
    return tuple(
        cls(api_key=key, min_version=lo, max_version=hi)
        for key, (lo, hi) in sorted(broker.api_versions.items())
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = response_module(API_KEY, ctx.api_version)
    return make(
        module.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(ctx.broker, ctx.api_version),
        throttle_time=timedelta(0),
    )


def unsupported_version_response(broker: BrokerContext, correlation_id: int) -> bytes:
    """UNSUPPORTED_VERSION (35) in v0 format with the supported list: the client retries lower."""
    module = response_module(API_KEY, 0)
    response = module.ApiVersionsResponse(
        error_code=ErrorCode.unsupported_version, api_keys=_api_keys(broker, 0)
    )
    return encode_response(correlation_id, response)


APIS = [(API_KEY, (0, 4), handle)]
