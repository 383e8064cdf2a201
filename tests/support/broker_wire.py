"""A minimal raw-socket Kafka client for broker tests: kio-encoded requests, framed by hand.

Used where a real client cannot express the case (unsupported versions, garbage
frames, disconnects mid-request) or hides it behind retries (the same batch sent
twice, a sequence gap).
"""

from __future__ import annotations

import datetime
import io
import itertools
import socket
import struct
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.produce.v9 import request as produce_req
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

_correlation_ids = itertools.count(1)


def record_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    first_timestamp: int | None = None,
) -> bytes:
    """One uncompressed RecordBatch v2 (non-idempotent, non-transactional) as on the wire,
    built by kafka-python's encoder (a second implementation, not the broker's). Record `i`
    has CreateTime `first_timestamp + i` ms (default: now); a time older than the broker's
    retention (7 days) lets its retention check delete the records while a test runs."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    if first_timestamp is None:
        first_timestamp = int(time.time() * 1000)

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 22,
    )
    for i, value in enumerate(values):
        key = None if keys is None else keys[i]
        builder.append(i, timestamp=first_timestamp + i, key=key, value=value, headers=[])
    return bytes(builder.build())


def producer_batch(
    pid: int,
    epoch: int,
    seq: int,
    values: list[bytes],
    *,
    transactional: bool = False,
    timestamp: datetime.datetime | None = None,
) -> bytes:
    """One RecordBatch v2 of an idempotent (or transactional) producer, by kio's writer;
    every record at `timestamp` (default: now)."""
    ts = timestamp or datetime.datetime.now(datetime.UTC)
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


def encode_request(request: Any, correlation_id: int = 1, client_id: str | None = "wire") -> bytes:
    """A full frame (size prefix included) for a kio request entity."""
    cls = type(request)
    header_cls = cls.__header_schema__
    header = header_cls(
        request_api_key=cls.__api_key__,
        request_api_version=cls.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header)
    entity_writer(cls)(buf, request)
    body = buf.getvalue()
    return struct.pack(">i", len(body)) + body


class Wire:
    """One TCP connection to a broker."""

    def __init__(self, bootstrap: str, timeout: float = 30) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        """The next response frame without its size prefix; None when the broker closed."""
        prefix = self._read_exact(4)
        if prefix is None:
            return None
        (size,) = struct.unpack(">i", prefix)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            try:
                chunk = self.sock.recv(n - len(chunks))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def call(self, request: Any, response_cls: type, correlation_id: int | None = None) -> Any:
        """Send `request`, decode the answer as `response_cls`; asserts the correlation id.

        Without `correlation_id`, each call gets the next one of a process-wide counter.
        """
        if correlation_id is None:
            correlation_id = next(_correlation_ids)
        self.send_raw(encode_request(request, correlation_id))
        frame = self.read_frame()
        assert frame is not None, "broker closed the connection"
        (corr,) = struct.unpack_from(">i", frame)
        assert corr == correlation_id
        offset = 4 + (1 if response_cls.__header_schema__.__flexible__ else 0)
        response, used = entity_reader(response_cls)(frame, offset)
        assert offset + used == len(frame)
        return response

    def sasl_plain(self, user: str, password: str) -> None:
        """Authenticate this connection with SASL/PLAIN (SaslHandshake v1, SaslAuthenticate
        v1); AssertionError naming the broker's answer when it refuses."""
        from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
        from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
        from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

        hs = self.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
        assert hs.error_code.name == "none", hs
        token = f"\0{user}\0{password}".encode()
        auth = self.call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)
        assert auth.error_code.name == "none", auth

    def sasl_scram(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> None:
        """Authenticate this connection with SASL/SCRAM (RFC 5802, computed here: a second
        implementation, not the broker's); AssertionError naming a refusal."""
        import base64
        import hashlib
        import hmac

        from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
        from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
        from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

        digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        hs = self.call(SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse)
        assert hs.error_code.name == "none", hs
        first_bare = f"n={user},r=wirenonce"
        auth = self.call(
            SaslAuthenticateRequest(auth_bytes=f"n,,{first_bare}".encode()),
            SaslAuthenticateResponse,
        )
        assert auth.error_code.name == "none", auth
        server_first = auth.auth_bytes.decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        salted = hashlib.pbkdf2_hmac(
            digest, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
        )
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        without_proof = f"c=biws,r={fields['r']}"
        message = f"{first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(hashlib.new(digest, client_key).digest(), message, digest).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
        final = f"{without_proof},p={proof.decode()}".encode()
        auth = self.call(SaslAuthenticateRequest(auth_bytes=final), SaslAuthenticateResponse)
        assert auth.error_code.name == "none", auth

    def closed_by_peer(self) -> bool:
        """True if the broker closed this connection (reads EOF/reset)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def produce_request(
    topic: str, partition: int, records: bytes, acks: int = 1
) -> produce_req.ProduceRequest:
    """Produce v9 of one record set to one partition."""
    return produce_req.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(seconds=5),
        topic_data=(
            produce_req.TopicProduceData(
                name=topic,
                partition_data=(
                    produce_req.PartitionProduceData(index=partition, records=records),
                ),
            ),
        ),
    )


def produce_partitions_request(
    topic: str, records_by_partition: dict[int, bytes], acks: int = 1
) -> produce_req.ProduceRequest:
    """Produce v9 of one record set to each of several partitions of `topic`."""
    return produce_req.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(seconds=5),
        topic_data=(
            produce_req.TopicProduceData(
                name=topic,
                partition_data=tuple(
                    produce_req.PartitionProduceData(index=p, records=r)
                    for p, r in records_by_partition.items()
                ),
            ),
        ),
    )


def fetch_request(
    topic: str, partitions: Sequence[int], *, max_bytes: int, partition_max_bytes: int
) -> fetch_req.FetchRequest:
    """Fetch v12 from offset 0 of `partitions`, no wait."""
    return fetch_req.FetchRequest(
        max_wait=timedelta(0),
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        forgotten_topics_data=(),
        topics=(
            fetch_req.FetchTopic(
                topic=topic,
                partitions=tuple(
                    fetch_req.FetchPartition(
                        partition=p, fetch_offset=0, partition_max_bytes=partition_max_bytes
                    )
                    for p in partitions
                ),
            ),
        ),
    )


# -- transactions, as a transactional producer drives them (for cases a client library
# -- would never send, such as a transactional batch outside its transaction) -------------


def init_transactional_producer(
    wire: Wire, transactional_id: str, *, timeout_s: float = 60
) -> tuple[int, int]:
    """(producer id, epoch) from InitProducerId v4 for `transactional_id`, sent on `wire`
    (which must reach the transaction coordinator: on one node, any connection). Retries
    while the coordinator is not ready: Apache Kafka creates `__transaction_state` on the
    first FindCoordinator for a transactional id and loads it before answering."""
    from kio.schema.errors import ErrorCode
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
    from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.init_producer_id.v4.response import InitProducerIdResponse

    deadline = time.monotonic() + timeout_s
    while True:
        found = wire.call(
            FindCoordinatorRequest(key=transactional_id, key_type=i8(1)), FindCoordinatorResponse
        )
        if found.error_code == ErrorCode.none:
            answer = wire.call(
                InitProducerIdRequest(
                    transactional_id=transactional_id, transaction_timeout=timedelta(seconds=60)
                ),
                InitProducerIdResponse,
            )
            if answer.error_code == ErrorCode.none:
                return int(answer.producer_id), int(answer.producer_epoch)
            error = answer.error_code
        else:
            error = found.error_code
        if not error.retriable or time.monotonic() > deadline:
            raise AssertionError(f"InitProducerId for `{transactional_id}`: {error.name}")
        time.sleep(0.2)


def add_partitions_to_txn(
    wire: Wire, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
) -> Any:
    """AddPartitionsToTxn v3 of one partition; the partition's error code."""
    from kio.schema.add_partitions_to_txn.v3 import request as add_req
    from kio.schema.add_partitions_to_txn.v3.response import AddPartitionsToTxnResponse

    answer = wire.call(
        add_req.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=i64(producer_id),
            v3_and_below_producer_epoch=i16(epoch),
            v3_and_below_topics=(
                add_req.AddPartitionsToTxnTopic(name=topic, partitions=(i32(partition),)),
            ),
        ),
        AddPartitionsToTxnResponse,
    )
    return answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def end_txn(wire: Wire, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> Any:
    """EndTxn v3; its error code."""
    from kio.schema.end_txn.v3.request import EndTxnRequest
    from kio.schema.end_txn.v3.response import EndTxnResponse

    request = EndTxnRequest(
        transactional_id=transactional_id,
        producer_id=i64(producer_id),
        producer_epoch=i16(epoch),
        committed=commit,
    )
    return wire.call(request, EndTxnResponse).error_code


def transactional_produce(
    wire: Wire,
    topic: str,
    partition: int,
    batch: bytes,
    *,
    transactional_id: str | None,
) -> Any:
    """Produce v9 (acks=all) of `batch` with the request's `transactional_id`; the
    partition's response (error code, base offset, error message)."""
    from dataclasses import replace

    from kio.schema.produce.v9.response import ProduceResponse

    request = replace(
        produce_request(topic, partition, batch, acks=-1), transactional_id=transactional_id
    )
    answer = wire.call(request, ProduceResponse)
    return answer.responses[0].partition_responses[0]
