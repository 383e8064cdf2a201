"""A minimal protocol-level client (kio codecs over a socket) for exact request sequences.

Real clients hide retries; to send *the same batch twice* or *a sequence gap*
on purpose, the tests speak the protocol directly with kio's generated codecs.
"""

from __future__ import annotations

import datetime
import io
import itertools
import socket
import struct
from typing import Any

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

_ids = itertools.count(1)


class WireClient:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, request: Any, response_cls: type) -> Any:
        header_cls = type(request).__header_schema__
        correlation_id = next(_ids)
        header = header_cls(
            request_api_key=type(request).__api_key__,
            request_api_version=type(request).__version__,
            correlation_id=correlation_id,
            client_id="wire-test",
        )
        body = io.BytesIO()
        entity_writer(header_cls)(body, header)
        entity_writer(type(request))(body, request)
        payload = body.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        resp_header, used = entity_reader(response_cls.__header_schema__)(frame, 0)
        assert resp_header.correlation_id == correlation_id
        response, _ = entity_reader(response_cls)(frame, used)
        return response

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf


def record_batch(
    pid: int, epoch: int, seq: int, values: list[bytes], *, transactional: bool = False
) -> bytes:
    ts = datetime.datetime.now(datetime.UTC)
    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(pid),
            producer_epoch=i16(epoch),
            base_sequence=i32(seq),
            attributes=i16(0x10 if transactional else 0),
            records=tuple(
                Record(attributes=i8(0), timestamp=ts, offset=i64(i), key=None, value=v, headers=())
                for i, v in enumerate(values)
            ),
        ),
    )
    return buf.getvalue()
