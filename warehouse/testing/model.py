"""A table test file, as written under `<project>/tests/` (pydantic, no Spark).

```yaml
tests:
  - name: an order joins its buyer's city
    table: dwd_orders
    given:
      ods_orders: [{order_id: o1, user_id: u1, amount: 12.5, event_time: "2024-01-01 10:00:00"}]
      dim_users: [{user_id: u1, city: Lyon, is_current: true}]
    expect:
      rows: [{order_id: o1, city: Lyon, amount: 12.50}]
```

`given` maps an input of the table to what it holds before the run: an upstream
table's (or a table its SQL reads as a snapshot) rows, as objects; a topic's records,
each an object (a JSON value), a string (the raw value, so a malformed record can be
given) or null (a record without a value). `expect.rows` are exactly the rows the
table holds after one run, compared on the columns they list, in any order;
`expect.quarantine` is how many records the run quarantined, or those rows.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

Record = dict[str, Any] | list[Any] | str | int | float | bool | None
"""A topic's record as a test gives it: a JSON value, a raw string, or null."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expected(_Model):
    """What the table holds after the run: `rows` (only the columns they list are
    compared, order ignored) and, when given, its quarantine (a count or rows)."""

    rows: list[dict[str, Any]]
    quarantine: int | list[dict[str, Any]] | None = None

    @field_validator("quarantine")
    @classmethod
    def _count(cls, value: int | list[dict[str, Any]] | None) -> Any:
        if isinstance(value, int) and (isinstance(value, bool) or value < 0):
            raise ValueError("a quarantine count is a whole number, 0 or more")
        return value


class TableTest(_Model):
    """One test: run `table` once over `given` and compare with `expect`."""

    name: str = Field(min_length=1)
    table: str = Field(min_length=1)
    given: dict[str, list[Record]] = Field(default_factory=dict)
    expect: Expected


class TableTestFile(_Model):
    """A `.yml` file of table tests."""

    tests: list[TableTest] = Field(min_length=1)
