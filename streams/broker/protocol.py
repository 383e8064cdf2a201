"""Framing: the 4-byte size prefix, the request header, and picking kio's codec.

Kafka messages themselves are never hand-encoded here: the request header and
body are read with kio's generated readers, responses written with kio's
writers. What this module owns is the envelope: the big-endian int32 length
prefix, peeking at the api key and version (the first four bytes of every
request header) to choose the kio classes, and the response header (the
correlation id, plus an empty tagged-field section for flexible responses —
ApiVersions' response header never has one, kio encodes that in its classes).
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from streams.broker.errors import InvalidRequestError

__all__ = [
    "API_VERSIONS_KEY",
    "FrameError",
    "RequestFrame",
    "encode_response",
    "encode_response_chunks",
    "frame_size",
    "make",
    "parse_request",
    "peek_api",
    "request_class",
    "response_class",
    "response_module",
]

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")
_API = struct.Struct(">hhi")


class FrameError(InvalidRequestError):
    """A frame that cannot be a Kafka request: the connection that sent it is closed."""

    message = "bad frame"


@dataclass(frozen=True, slots=True)
class RequestFrame:
    """One decoded request: header fields plus the kio request entity."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: Any
    size: int


def frame_size(prefix: bytes, *, max_bytes: int) -> int:
    """The body size announced by a 4-byte prefix; `FrameError` if negative or over the limit."""
    (size,) = _SIZE.unpack(prefix)
    if size < 0:
        raise FrameError(f"negative frame size `{size}`")
    if size > max_bytes:
        raise FrameError(f"frame of `{size}` bytes exceeds socket.request.max.bytes=`{max_bytes}`")
    if size < _API.size:
        raise FrameError(f"frame of `{size}` bytes is too short for a request header")
    return size


def peek_api(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame without decoding the rest."""
    if len(frame) < _API.size:
        raise FrameError(f"frame of `{len(frame)}` bytes is too short for a request header")
    return _API.unpack_from(frame, 0)


@functools.cache
def request_class(api_key: int, version: int) -> type:
    """kio's request entity for (api key, version); `UnknownAPIKey`/`UnknownEntity` if none."""
    return _payload_class(api_key, version, EntityType.request)


@functools.cache
def response_class(api_key: int, version: int) -> type:
    """kio's response entity for (api key, version)."""
    return _payload_class(api_key, version, EntityType.response)


@functools.cache
def response_module(api_key: int, version: int) -> ModuleType:
    """The kio module holding the response entity and its nested classes for a version."""
    return load_payload_module(api_key, version, EntityType.response)


def _payload_class(api_key: int, version: int, kind: EntityType) -> type:
    module = load_payload_module(api_key, version, kind)  # type: ignore[arg-type]
    suffix = "Request" if kind is EntityType.request else "Response"
    for name, value in vars(module).items():
        if (
            isinstance(value, type)
            and name.endswith(suffix)
            and getattr(value, "__type__", None) is kind
        ):
            return value
    raise UnknownEntity(f"kio module {module.__name__} has no {suffix} entity")


@functools.cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


@functools.cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def parse_request(frame: bytes | memoryview, api_key: int, version: int) -> RequestFrame:
    """Decode header and body of one request frame (the bytes after the size prefix).

    Raises `UnknownAPIKey`/`UnknownEntity` (kio) when kio has no codec for the
    pair, and `FrameError` when the bytes do not decode.
    """
    cls = request_class(api_key, version)
    try:
        header, used = _reader(cls.__header_schema__)(frame, 0)
        request, body_used = _reader(cls)(frame, used)
    except (UnknownAPIKey, UnknownEntity):
        raise
    except Exception as e:  # kio's native readers raise several types on garbage
        raise FrameError(f"cannot decode {cls.__name__} v{version}: {type(e).__name__}: {e}") from e
    # Trailing bytes are ignored, as Kafka does: librdkafka 2.x sends three
    # stray bytes after an all-topics Metadata v12 request.
    return RequestFrame(
        api_key=api_key,
        api_version=version,
        correlation_id=header.correlation_id,
        client_id=header.client_id,
        request=request,
        size=len(frame),
    )


_BUFFERS = (bytes, bytearray, memoryview)


class _Chunks:
    """kio's output buffer: small writes are coalesced, large payloads (record sets)
    are kept by reference, so a fetched record set is never copied while encoding.

    A record set that is not a buffer (`storage.FileRecords`: ranges of segment
    files, anything with `__len__` and `__bytes__`) is kept as its own chunk for
    the connection to send with `sendfile`."""

    __slots__ = ("chunks", "small", "size")
    LARGE = 32 * 1024

    def __init__(self) -> None:
        self.chunks: list[Any] = []
        self.small = bytearray()
        self.size = 0

    def write(self, data: Any) -> int:
        n = len(data)
        if n >= self.LARGE or not isinstance(data, _BUFFERS):
            if self.small:
                self.chunks.append(self.small)
                self.small = bytearray()
            self.chunks.append(data)
        else:
            self.small += data
        self.size += n
        return n

    def finish(self) -> list[Any]:
        if self.small:
            self.chunks.append(self.small)
            self.small = bytearray()
        return self.chunks


def encode_response_chunks(correlation_id: int, response: Any) -> list[Any]:
    """A complete response frame as chunks to send in order (no copy of record sets):
    buffers, and record sets given as non-buffer objects (see `_Chunks`) as they are."""
    cls = type(response)
    out = _Chunks()
    out.write(b"\0\0\0\0")
    out.write(struct.pack(">i", correlation_id))
    if cls.__header_schema__.__flexible__:
        out.write(b"\0")  # empty tagged-field section of response header v1
    _writer(cls)(out, response)
    chunks = out.finish()
    first = chunks[0]
    assert isinstance(first, bytearray)
    _SIZE.pack_into(first, 0, out.size - 4)
    return chunks


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A complete response frame: size prefix, response header, kio-encoded body."""
    chunks = encode_response_chunks(correlation_id, response)
    return b"".join(c if isinstance(c, _BUFFERS) else bytes(c) for c in chunks)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def make(cls: type, /, **values: Any) -> Any:
    """Build a kio entity, dropping values for fields this version does not have.

    Lets one handler serve many versions: pass every field any version knows,
    each class keeps its own. Fields a version requires must still be given.
    """
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})
