"""The Arrow parse (`streams.landing.arrow_json`) against Spark's (`parse_kafka`).

The contract: a record Arrow types must come out exactly as Spark types it (bit for
bit, -0.0 and NaN included), and every other record goes back raw for Spark's parse,
or, with `explain=True`, comes back as a bad record with the very reason Spark's parse
gives it. Arrow may hand back a record Spark would have accepted; it may never keep
one Spark would have quarantined, nor type one differently, nor explain one Spark
accepts or explains otherwise. Generated values (hypothesis) mix
well-formed records with the inputs the two parsers are known to treat differently.
"""

from __future__ import annotations

import datetime as dt
import gc
import math
import struct
import tracemalloc

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streams.kafka import SCHEMA, parse_kafka
from streams.landing import payload_schema, split_block

pytestmark = pytest.mark.spark

FIELDS = [
    ("i", "bigint"),
    ("j", "int"),
    ("d", "double"),
    ("s", "string"),
    ("b", "boolean"),
    ("t", "timestamp"),
]
DDL = ", ".join(f"{n} {t}" for n, t in FIELDS)
ARROW = payload_schema(FIELDS)
TS = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def _batch(values: list[bytes | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([None] * n, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(["t"] * n),
            pa.array([0] * n, pa.int32()),
            pa.array(range(n), pa.int64()),
            pa.array([TS] * n, pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp"],
    )


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    return a == b and type(a) is type(b)


def _spark_parse(spark, values: list[bytes | None], required: tuple[str, ...]):
    rows = [(None, v, "t", 0, i, TS, 0, None) for i, v in enumerate(values)]
    df = spark.createDataFrame(rows, SCHEMA)
    parsed = parse_kafka(df, format="json", schema=DDL, required=required)
    names = [n for n, _ in FIELDS]
    # Timestamps as microseconds since the epoch: Python's datetime has no year 0.
    micros = parsed.good.selectExpr(
        "_offset", *(f"unix_micros({n}) AS {n}" if t == "timestamp" else n for n, t in FIELDS)
    )
    good = {r["_offset"]: tuple(r[n] for n in names) for r in micros.collect()}
    bad = {r["_offset"]: r["_error"] for r in parsed.bad.select("_offset", "_error").collect()}
    return good, bad


def check_against_spark(
    spark, values: list[bytes | None], required: tuple[str, ...] = (), **limits: int
):
    """Assert the contract; return (offsets Arrow typed, offsets it handed back).
    `limits`: `split_block`'s bisection limits."""
    good, bad = _spark_parse(spark, values, required)
    assert set(good) | set(bad) == set(range(len(values))) and not set(good) & set(bad)
    out = split_block(_batch(values), ARROW, required, **limits)
    explained = split_block(_batch(values), ARROW, required, explain=True, **limits)
    assert explained.rows.equals(out.rows)
    known = explained.bad.column("offset").to_pylist()
    assert sorted(known + explained.fallback.column("offset").to_pylist()) == sorted(
        out.fallback.column("offset").to_pylist()
    )
    assert explained.bad.column("value").to_pylist() == [values[o] for o in known]
    for o, why in zip(known, explained.bad.column("_error").to_pylist(), strict=True):
        assert o in bad, f"explained {values[o]!r} ({why}), which Spark types"
        assert why == bad[o], f"{values[o]!r}: {why!r} here, {bad[o]!r} from Spark"
    rows = out.rows
    for name, kind in FIELDS:
        if kind == "timestamp":
            i = rows.schema.get_field_index(name)
            rows = rows.set_column(i, name, rows.column(i).cast(pa.int64()))
    typed = rows.to_pylist()
    back = out.fallback.column("offset").to_pylist()
    kept = [r["_offset"] for r in typed]
    assert sorted(kept + back) == list(range(len(values))), "a record lost or doubled"
    assert out.fallback.column("value").to_pylist() == [values[o] for o in back]
    for r in typed:
        o = r["_offset"]
        assert o in good, f"Arrow typed {values[o]!r}, which Spark quarantines"
        mine = tuple(r[n] for n, _ in FIELDS)
        assert all(_same(a, b) for a, b in zip(mine, good[o], strict=True)), (
            f"{values[o]!r}: Arrow {mine}, Spark {good[o]}"
        )
        assert (r["_topic"], r["_partition"], r["_timestamp"]) == ("t", 0, TS)
    return kept, back


# -- generated values ---------------------------------------------------------------

_EDGE_NUMBERS = st.sampled_from(
    [
        "-0",
        "-0.0",
        "0",
        "1.0",
        "1e2",
        "1E-400",
        "1e400",
        "01",
        "+1",
        ".5",
        "5.",
        "-0e0",
        "-0.5",
        "NaN",
        "Infinity",
        "9223372036854775807",
        "9223372036854775808",
        "2147483648",
        "-2147483648",
        "4.9e-324",
        "123456789012345678901234567890",
        "0.1",
        "-12",
    ]
)
_NUMBERS = st.one_of(
    _EDGE_NUMBERS,
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
_BAD_BYTE = "\ue000"
"""Stands for a byte that is not UTF-8 (0xff) until the value is encoded."""
_TEXT = st.lists(
    st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")).filter(
            lambda c: c not in '"\\'
        ),
        st.sampled_from(
            [
                '\\"',
                "\\\\",
                "\\n",
                "\\u0000",
                "\\ud800",
                "\\ud83d\\ude00",
                "\t",
                "\x01",
                "'",
                _BAD_BYTE,
            ]
        ),
    ),
    max_size=12,
).map(lambda parts: '"' + "".join(parts) + '"')
_SCALAR = st.one_of(_NUMBERS, _TEXT, st.sampled_from(["true", "false", "null", "True"]))
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(["a", "i", "s"]), inner), max_size=3).map(
            lambda kv: "{" + ",".join(f'"{k}":{v}' for k, v in kv) + "}"
        ),
    ),
    max_leaves=5,
)
_OFFSETS = st.one_of(
    st.sampled_from(["Z", "+00:00", "+01:00", "-05:30", "+14:00", "+18:00", "-18:00"]),
    st.sampled_from(["+18:30", "+19:00", "-23:59", "+05:60", "z", "", "+0100", "+01"]),
)
_EDGE_TIMES = st.sampled_from(
    [
        "2026-02-29T00:00:00Z",
        "2024-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T23:59:60Z",
        "0000-01-01T00:00:00Z",
        "2026-01-01T00:00Z",
        "2026-01-01",
        "2026-01-01 00:00:00Z",
        "2026-1-1T00:00:00Z",
        "+2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00.1234567Z",
        "1969-12-31T23:59:59.999999Z",
        "9999-12-31T23:59:59.999999Z",
        "2026-01-01T00:00:00",
    ]
)


@st.composite
def _instant(draw) -> str:
    t = draw(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)))
    digits = draw(st.integers(0, 7))
    frac = f".{t.microsecond:06d}{draw(st.integers(0, 9))}"[: digits + 1] if digits else ""
    return f'"{t.year:04d}-{t:%m-%dT%H:%M:%S}{frac}{draw(_OFFSETS)}"'


_ZEROS = st.sampled_from(["-0", "-0.0", "-0e0", "-0.5", "0", "-0 "])
_TYPED = {
    "t": st.one_of(
        _instant(), _instant(), _instant(), _EDGE_TIMES.map(lambda x: f'"{x}"'), _NUMBERS
    ),
    "i": st.one_of(*[st.integers(-(2**63), 2**63 - 1).map(str)] * 3, _EDGE_NUMBERS),
    "j": st.one_of(*[st.integers(-(2**31), 2**31 - 1).map(str)] * 3, _EDGE_NUMBERS),
    "d": st.one_of(
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.integers().map(str),
        _EDGE_NUMBERS,
        _ZEROS,
    ),
    "s": _TEXT,
    "b": st.sampled_from(["true", "false"]),
}
_OTHER_NAMES = st.sampled_from(["I", "S", "\\u0069", "x", ""])
_SPACE = st.sampled_from(["", "", "", "", " ", " ", "\t", "\n"])
_RARE_SPACE = st.sampled_from([""] * 9 + [" ", "\t", "\n"])


@st.composite
def member(draw) -> tuple[str, str]:
    """A name and a value: mostly a schema field with a value of its kind (edge cases
    included), sometimes any value, or another name."""
    if draw(st.integers(0, 9)) == 0:
        return draw(_OTHER_NAMES), draw(_VALUE)
    name = draw(st.sampled_from(sorted(_TYPED)))
    how = draw(st.integers(0, 7))
    value = draw(_VALUE) if how == 0 else "null" if how == 1 else draw(_TYPED[name])
    return name, value


@st.composite
def json_value(draw) -> bytes | None:
    kind = draw(st.sampled_from(["object"] * 12 + ["other", "null", "mutated"]))
    if kind == "null":
        return None
    if kind == "other":
        text = draw(_VALUE)
    else:
        dupes = draw(st.integers(0, 9)) == 0  # a repeated name, now and then
        members = draw(st.lists(member(), max_size=6, unique_by=None if dupes else lambda m: m[0]))
        sp = draw(_SPACE)
        text = "{" + ",".join(f'{sp}"{k}"{sp}:{sp}{v}' for k, v in members) + "}"
        text = draw(_RARE_SPACE) + text + draw(_RARE_SPACE)
    if kind == "mutated":
        how = draw(st.sampled_from(["twice", "trailing", "single", "cut", "bom"]))
        text = {
            "twice": text + " " + text,
            "trailing": text + "x",
            "single": text.replace('"', "'"),
            "cut": text[: max(1, len(text) // 2)],
            "bom": "\ufeff" + text,
        }[how]
    return text.encode().replace(_BAD_BYTE.encode(), b"\xff")


_VALID = {
    "i": st.one_of(
        st.integers(-(2**63), 2**63 - 1).map(str),
        st.sampled_from(["-0", "0", "9223372036854775807", "-9223372036854775808"]),
    ),
    "j": st.one_of(
        st.integers(-(2**31), 2**31 - 1).map(str),
        st.sampled_from(["-0", "2147483647", "-2147483648"]),
    ),
    "d": st.one_of(
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.integers().map(str),
        _ZEROS,
        st.sampled_from(["1E-400", "4.9e-324", "1e308", "123456789012345678901234567890"]),
    ),
    "s": _TEXT,
    "b": st.sampled_from(["true", "false", "null"]),
    "t": st.one_of(_instant(), _EDGE_TIMES.map(lambda x: f'"{x}"')),
}


@st.composite
def well_formed(draw) -> bytes:
    """An object of the schema's fields with values of their own types, edge values
    included: the values Arrow accepts, where a silent difference would hide."""
    names = draw(st.lists(st.sampled_from(sorted(_VALID)), unique=True))
    return ("{" + ",".join(f'"{n}":{draw(_VALID[n])}' for n in names) + "}").encode()


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=st.lists(well_formed(), min_size=60, max_size=160))
def test_well_formed_values_agree_with_spark(spark, values) -> None:
    check_against_spark(spark, values, min_piece=1, max_parses=100 * len(values))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(values=st.lists(json_value(), min_size=60, max_size=160), required=st.booleans())
def test_generated_values_agree_with_spark(spark, values, required) -> None:
    # Bisected down to single values: Arrow gets to type every value it accepts, so
    # each generated value is compared (with the defaults, one refused value sends its
    # neighbours back too, and they would go untested).
    check_against_spark(
        spark, values, ("i",) if required else (), min_piece=1, max_parses=100 * len(values)
    )


def _bits(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Doubles as their bits: Arrow's equality takes -0.0 for 0.0."""
    return pa.RecordBatch.from_arrays(
        [c.view(pa.int64()) if pa.types.is_float64(c.type) else c for c in batch.columns],
        names=batch.schema.names,
    )


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@example(values=[b'{"I":1e400}'], required=False)  # Arrow refuses it in an ignored member
@given(
    values=st.lists(st.one_of(json_value(), well_formed()), min_size=1, max_size=60),
    required=st.booleans(),
)
def test_the_flat_parser_types_exactly_as_arrow(values, required) -> None:
    # No Spark: the Arrow path is held to Spark's by the tests above (value by value:
    # bisected to single values), and a value the flat parser types must come out as
    # the Arrow path types that value alone, bit for bit. Alone, because in a block a
    # value Arrow refuses can send a good neighbour back with it.
    req = ("i",) if required else ()
    out = split_block(
        _batch(values), ARROW, req, flat=True, min_piece=1, max_parses=100 * len(values) + 10
    )
    kept = out.rows.column("_offset").to_pylist()
    back = out.fallback.column("offset").to_pylist()
    assert sorted(kept + back) == list(range(len(values))), "a record lost or doubled"
    flat = split_block(_batch(values), ARROW, req, flat=True, max_parses=0)
    for i, k in enumerate(flat.rows.column("_offset").to_pylist()):
        alone = split_block(_batch([values[k]]), ARROW, req, flat=False)
        mine = flat.rows.select(ARROW.names).slice(i, 1)
        assert alone.rows.num_rows == 1, f"{values[k]!r}: typed here, sent back by Arrow"
        assert _bits(mine).equals(_bits(alone.rows.select(ARROW.names))), values[k]


def test_the_flat_parser_is_built_and_types_plain_objects() -> None:
    from streams.landing import arrow_json

    assert arrow_json._flatjson is not None, "reinstall with a C compiler (setup.py)"
    values = [
        b'{"i":%d,"j":%d,"d":%r,"s":"v\xc3\xa9 %d","b":%s,"t":"2026-01-02T03:04:05.5Z","x":1}'
        % (k * 7919, -k, k / 3, k, b"true" if k % 2 else b"false")
        for k in range(200)
    ]
    values[7] = b'{"i": 1, "s": "esc\\n"}'  # an escape: declined, the Arrow path types it
    values[9] = values[9][:40]  # cut off: told apart from the values it declines
    parser = arrow_json._parser(ARROW, (), True)
    values[11] = b'{"i":1,"s":"x"}'
    mask, cut, schema_only, rows, reject = parser.parse_flat(_batch(values).column("value"))
    assert mask.tolist() == [k not in (7, 9) for k in range(200)] and reject is None
    assert cut.tolist() == [k == 9 for k in range(200)]
    # Over the typed values: members of the schema only (the others have `x`).
    assert schema_only.tolist() == [k == 11 for k in range(200) if k not in (7, 9)]
    assert rows.column("s")[1].as_py() == "v\u00e9 1"
    assert rows.column("t")[0].as_py() == dt.datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=dt.UTC)
    out = split_block(_batch(values), ARROW)
    assert out.rows.num_rows == 199 and out.fallback.column("offset").to_pylist() == [9]
    out = split_block(_batch(values), ARROW, explain=True)
    assert out.rows.num_rows == 199 and out.fallback.num_rows == 0
    assert out.bad.column("offset").to_pylist() == [9]


def test_the_flat_parser_finds_what_ends_a_string_at_every_position() -> None:
    # The string scan steps 16 and 8 bytes at a time: put each byte that stops it
    # (or is checked one by one) before, inside and after a step, in keys too.
    from streams.landing import arrow_json

    kinds = {
        b"\xc3\xa9": "\u00e9",  # 2-byte UTF-8: typed
        b"\xe2\x82\xac": "\u20ac",  # 3-byte: typed
        b"\\n": None,  # an escape: declined
        b"\x01": None,  # a control character: declined
        b"\xff": None,  # not UTF-8: declined
        b"\xc3": None,  # a cut UTF-8 sequence: declined
    }
    values, expected = [], []
    for k in range(40):
        for raw, text in kinds.items():
            values.append(b'{"s":"' + b"a" * k + raw + b"b" * (40 - k) + b'"}')
            expected.append(None if text is None else "a" * k + text + "b" * (40 - k))
        values.append(b'{"' + b"k" * k + b'":1,"s":"' + b"a" * k + b'"}')
        expected.append("a" * k)
    parser = arrow_json._parser(ARROW, (), True)
    mask, cut, _, rows, _ = parser.parse_flat(_batch(values).column("value"))
    assert not cut.any()
    assert mask.tolist() == [e is not None for e in expected]
    assert rows.column("s").to_pylist() == [e for e in expected if e is not None]


def _typed_rows(tag: bytes, n: int) -> pa.RecordBatch:
    """The payload columns `split_block` types from `n` flat values marked `tag`; every
    other object of the parse is gone when this returns."""
    values = [
        b'{"i":%d,"j":%d,"d":%d.5,"s":"%s %d","b":%s}'
        % (k, -k, k, tag * 100, k, b"true" if k % 3 else b"false")
        for k in range(n)
    ]
    return split_block(_batch(values), ARROW).rows.select(["i", "j", "d", "s", "b"])


def test_the_typed_rows_outlive_the_parse() -> None:
    # The rows are the flat parser's own memory (the next test): it must live as long
    # as they do, whatever goes first. Parses after the first reuse what the allocator
    # got back, so rows that outlived their memory would read the later values.
    rows = _typed_rows(b"a", 2000)
    gc.collect()
    later = [_typed_rows(b"b", 2000) for _ in range(5)]
    gc.collect()
    assert rows.to_pydict() == {
        "i": list(range(2000)),
        "j": [-k for k in range(2000)],
        "d": [k + 0.5 for k in range(2000)],
        "s": ["a" * 100 + f" {k}" for k in range(2000)],
        "b": [k % 3 != 0 for k in range(2000)],
    }
    assert later[-1].column("s")[0].as_py() == "b" * 100 + " 0"


def test_the_typed_rows_are_the_flat_parsers_memory() -> None:
    # The flat parser's columns reach the rows as the parse wrote them: neither Python's
    # heap (the parse handing back copies) nor Arrow's pool (the rows combined into new
    # arrays) holds the typed strings a second time.
    strings = 1000 * 100
    _typed_rows(b"w", 1000)  # the parser's schema compiled, imports done
    gc.collect()
    pool = pa.total_allocated_bytes()
    tracemalloc.start()
    try:
        rows = _typed_rows(b"v", 1000)
        heap = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    held = pa.total_allocated_bytes() - pool
    assert rows.column("s").to_pylist() == ["v" * 100 + f" {k}" for k in range(1000)]
    assert heap < strings / 4, f"{heap:,} B of Python objects held for {strings:,} B typed"
    assert held < strings / 4, f"{held:,} B of Arrow's pool held for {strings:,} B typed"


def test_known_differences_fall_back(spark) -> None:
    values = [
        b'{"d": -0}',  # Arrow -0.0, Spark 0.0
        b'{"i": 1}{"i": 2}',  # two rows for Arrow
        b'{"s": "\xff"}',  # Arrow keeps invalid UTF-8
        b'{"s": 5}',  # Spark: "5"; Arrow refuses
        b"{'i': 1}",  # Spark allows single quotes
        b'{"i": 1,\n"d": 2}',  # a newline splits a line-delimited read
        b"null",  # crashes pyarrow 26's reader (apache/arrow#47409)
        b'{"d": NaN}',  # Arrow accepts the non-numeric numbers, not all of Spark's spellings
        b'{"d": -Infinity}',
        b'{"i": 1, "s": "cut o',  # cut off: screened out, never parsed
        b'{"i": 1, "i": 2}',  # Spark keeps the last
        b'{"t": "2026-01-01T00:00:00+19:00"}',  # Spark refuses offsets beyond 18 hours
        b'{"t": "2026-01-01T00:00Z"}',  # Spark refuses, Arrow reads 00:00:00
        b'{"t": "2026-01-01T00:00:00"}',  # Spark reads it in the session time zone
        b'{"t": "2026-01-01T00:00:00.1234567Z"}',  # Spark truncates, Arrow refuses
        b'{"t": "2026-02-30T00:00:00Z"}',  # no such day
    ]
    kept, back = check_against_spark(spark, values)
    assert kept == [] and back == list(range(len(values)))


def test_plain_values_are_typed_by_arrow(spark) -> None:
    values = [
        (
            b'{"i": %d, "j": %d, "d": %r, "s": "v%d \\u00e9\\n", "b": %s, "extra": [1, {"x": null}]}'
            % (k * 7919, -k, k / 3, k, b"true" if k % 2 else b"false")
        )
        for k in range(500)
    ]
    values[250] = b'{"i": "not a number"}'
    kept, back = check_against_spark(spark, values)
    assert 250 in back and len(kept) >= 480  # one bad value costs a few neighbours at most


def test_required_null_falls_back(spark) -> None:
    values = [b'{"i": 1}', b'{"d": 1.5}', b'{"i": null}', b'{"i": 2}']
    kept, back = check_against_spark(spark, values, ("i",))
    assert kept == [0, 3] and back == [1, 2]


def test_known_bad_records_are_explained_as_spark_does(spark) -> None:
    whole = b'{"i": 1, "j": 2, "s": "v\xc3\xa9", "b": true, "d": 1.5}'
    cuts = [whole[:k] for k in range(1, len(whole))]  # cut after every byte
    values = [
        *cuts,
        None,
        b'{"j": 1}',  # both required fields missing
        b'{"i": null, "j": 3}',  # one null, one missing
        b'{"i": 1, "s": null}',
        b'{"i": 1, "s": "x"}',  # good
        b'{"i": 1, "s": "x"} ',  # good for Spark; not one the flat parser types
        b'{"i": 1, "s": "x"}x',  # Spark's verdict, not one the flat parser knows
        b'{"i": 1, "s": "\xc3',  # cut inside a character: left to Spark
        b'{"i": 1, "t": "2026-01-01"}',  # a timestamp Spark reads: left to Spark
        b'{"s": "x", "t": "2026-01-01"}',
    ]
    check_against_spark(spark, values, ("i", "s"))
    out = split_block(_batch(values), ARROW, ("i", "s"), explain=True)
    reasons = dict(
        zip(out.bad.column("offset").to_pylist(), out.bad.column("_error").to_pylist(), strict=True)
    )
    n = len(cuts)
    # Left to Spark: a cut inside a character, and after a number's point (the flat
    # parser declines an unfinished number before it sees the end).
    left = {k for k, c in enumerate(cuts) if c.endswith((b"\xc3", b"1."))}
    assert len(left) == 2
    assert all(reasons.get(k) == "invalid JSON" for k in range(n) if k not in left)
    assert not left & set(reasons)
    assert reasons[n] == "value is null"
    assert reasons[n + 1] == "missing required field `i`; missing required field `s`"
    assert reasons[n + 2] == reasons[n + 1]
    assert reasons[n + 3] == "missing required field `s`"
    assert not {n + 4, n + 5, n + 6, n + 7, n + 8, n + 9} & set(reasons)
