"""`warehouse produce` checks every input line before it sends any (no broker needed here:
a bad input never gets as far as one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_project
from warehouse.cli.errors import TopicInputError
from warehouse.cli.main import main
from warehouse.cli.topics import read_json_lines


def lines(*texts: str) -> list[bytes]:
    return [t.encode() for t in texts]


def test_good_lines_become_records_keyed_by_the_field_as_written() -> None:
    got = read_json_lines(
        lines('{"id": "a", "n": 1}', "", '  {"id": 7}  ', '{"id": {"x": 1}}', '{"id": true}'),
        source="f",
        key="id",
    )
    assert got == [
        (b"a", b'{"id": "a", "n": 1}'),
        (b"7", b'{"id": 7}'),
        (b'{"x":1}', b'{"id": {"x": 1}}'),
        (b"true", b'{"id": true}'),
    ]


def test_without_key_any_json_value_goes_unkeyed() -> None:
    assert read_json_lines(lines("[1, 2]", '"s"', "{}"), source="f") == [
        (None, b"[1, 2]"),
        (None, b'"s"'),
        (None, b"{}"),
    ]


def test_bad_lines_are_named_by_number_blank_lines_counted() -> None:
    with pytest.raises(TopicInputError) as e:
        read_json_lines(
            lines('{"id": 1}', "", "{oops", '{"other": 1}', '{"id": null}', "[1]"),
            source="`in.jsonl`",
            key="id",
        )
    message = str(e.value)
    assert e.value.lines == [3, 4, 5, 6]
    assert "4 of the lines of `in.jsonl` cannot be produced, so nothing was sent" in message
    assert "`in.jsonl` line 3: not valid JSON" in message
    assert "line 4: the key field `id` is missing (fields: `other`)" in message
    assert "line 5: the key field `id` is null" in message
    assert "line 6: a JSON list, not an object with the key field `id`" in message


def test_not_utf8_names_the_line() -> None:
    with pytest.raises(TopicInputError) as e:
        read_json_lines([b'{"a": 1}', b'{"a": "\xff"}'], source="f")
    assert e.value.lines == [2] and "not UTF-8" in str(e.value)


def test_many_bad_lines_show_the_first_five_and_the_count() -> None:
    with pytest.raises(TopicInputError) as e:
        read_json_lines(lines(*["x"] * 8), source="f")
    assert "f line 5:" in str(e.value) and "f line 6:" not in str(e.value)
    assert "... and 3 more" in str(e.value)


def test_a_bad_file_exits_2_and_starts_no_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = write_project(tmp_path / "proj")  # bootstrap: embedded
    data = tmp_path / "in.jsonl"
    data.write_text('{"order_id": "o1"}\n{"user_id": "u"}\n')
    argv = ["produce", "--topic", "orders", "--key", "order_id", str(data), "--project", str(proj)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "line 2: the key field `order_id` is missing" in err and "nothing was sent" in err
    assert not (proj / ".warehouse" / "broker").exists()
    assert (
        main(
            [
                "produce",
                "--topic",
                "orders",
                str(tmp_path / "missing.jsonl"),
                "--project",
                str(proj),
            ]
        )
        == 2
    )
    assert "missing.jsonl` does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--max", "0"], ["--timeout", "-1"]])
def test_consume_refuses_out_of_range_arguments(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["consume", "--topic", "t", *argv, "--project", "/nonexistent"]) == 2
    assert "`--max` must be >= 1" in capsys.readouterr().err
