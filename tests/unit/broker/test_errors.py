from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from streams.broker import errors


def test_registered_classes_round_trip_through_for_code() -> None:
    for cls in (
        errors.UnknownTopicOrPartitionError,
        errors.CorruptMessageError,
        errors.InvalidTopicError,
        errors.UnsupportedVersionError,
        errors.TopicAlreadyExistsError,
    ):
        assert errors.for_code(cls.errno) is cls
        assert cls().error_code == ErrorCode(cls.errno)


def test_every_kafka_code_has_a_class_with_that_errno() -> None:
    for code in ErrorCode:
        if code == ErrorCode.none:
            continue
        cls = errors.for_code(int(code))
        assert issubclass(cls, errors.BrokerError)
        assert cls.errno == int(code)
        assert cls.retriable == code.retriable


def test_message_names_class_code_and_detail() -> None:
    err = errors.InvalidTopicError("topic name `../x` has characters outside [a-zA-Z0-9._-]")
    assert "[Error 17] InvalidTopicError" in str(err)
    assert "`../x`" in str(err)


def test_zero_and_unknown_codes_are_rejected() -> None:
    with pytest.raises(ValueError, match="success"):
        errors.for_code(0)
    with pytest.raises(ValueError, match="`31999`"):
        errors.for_code(31999)
