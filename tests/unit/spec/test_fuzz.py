"""Whatever a table file holds, loading ends in a project or a ProjectError, never a crash."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from warehouse import Project, ProjectError

KEYS = [
    "table",
    "source",
    "kafka",
    "topic",
    "format",
    "schema",
    "sink",
    "mode",
    "keys",
    "transform",
    "sql",
    "watermark",
    "column",
    "delay",
    "dedupe",
    "aggregate",
    "window",
    "measures",
    "group_by",
    "expectations",
    "publish",
    "read",
    "join_streams",
    "x",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from(
        [
            "ods_a",
            "orders",
            "raw",
            "json",
            "upsert",
            "scd2",
            "append",
            "changes",
            "10 minutes",
            "SELECT key FROM source",
            "SELECT FROM",
            "expect_column_values_to_not_be_null",
            "",
        ]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
    ),
    max_leaves=12,
)
DOCUMENTS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6)
BASE = "table: ods_a\nsource: {kafka: {topic: a, format: raw}}\n"


TEMPLATE = {
    "table": "dwd_x",
    "source": {"table": "ods_a", "read": "append"},
    "transform": {"sql": "SELECT key, value, _timestamp AS ts FROM source"},
    "watermark": {"column": "ts", "delay": "1 minute"},
    "dedupe": {"keys": ["key"]},
    "aggregate": {
        "window": {"column": "ts", "size": "1 minute"},
        "group_by": ["key"],
        "measures": {"n": "count(*)"},
    },
    "sink": {"mode": "upsert", "keys": ["window_start", "key"]},
    "expectations": [{"expect_column_values_to_not_be_null": {"column": "key"}}],
    "publish": {"kafka": {"topic": "mv.x"}},
}


@st.composite
def mutated(draw: st.DrawFn) -> dict:
    """The valid template with some parts replaced or removed: reaches the deeper checks."""
    doc = {k: v for k, v in TEMPLATE.items()}
    for key in draw(st.lists(st.sampled_from(sorted(TEMPLATE)), max_size=3, unique=True)):
        if draw(st.booleans()):
            doc.pop(key)
        else:
            doc[key] = draw(VALUES)
    return doc


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(DOCUMENTS, mutated()))
def test_any_table_document_loads_or_reports_problems(document: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "layers" / "ods").mkdir(parents=True)
        (root / "layers" / "dwd").mkdir()
        (root / "layers" / "ods" / "a.yml").write_text(BASE)
        (root / "layers" / "dwd" / "fuzz.yml").write_text(yaml.safe_dump(document))
        try:
            Project.load(root, environ={})
        except ProjectError as e:
            assert e.problems and all(p.path and p.message for p in e.problems)
            assert len(str(e).splitlines()) == len(e.problems)


CONF_KEYS = [
    "warehouse_root",
    "kafka",
    "bootstrap",
    "security",
    "protocol",
    "password",
    "engines",
    "delta",
    "spark",
    "conf",
    "master",
    "embedded",
    "port",
    "x",
]
CONF_VALUES = st.recursive(
    st.one_of(SCALARS, st.sampled_from(["${UNSET_VAR}", "${SET_VAR}", "${UNSET:-d}", "auto"])),
    lambda inner: st.dictionaries(st.sampled_from(CONF_KEYS), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(CONF_KEYS), CONF_VALUES, max_size=5))
def test_any_conf_document_loads_or_reports_problems(document: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "layers" / "ods").mkdir(parents=True)
        (root / "conf").mkdir()
        (root / "layers" / "ods" / "a.yml").write_text(BASE)
        (root / "conf" / "local.yml").write_text(yaml.safe_dump(document))
        try:
            Project.load(root, environ={"SET_VAR": "v", "WAREHOUSE__ENGINES__KAFKA": "python"})
        except ProjectError as e:
            assert e.problems and all(p.path.startswith(("conf/", "<")) for p in e.problems)
