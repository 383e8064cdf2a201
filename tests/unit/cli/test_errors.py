"""How the CLI reports errors: every `streams` error root as `error: <message>` with exit 1
and no traceback (`-v` adds it); an error nobody anticipated keeps its traceback."""

from __future__ import annotations

import importlib

import pytest

from warehouse.cli.main import report
from warehouse.errors import STREAMS_ERRORS, WarehouseError, known_errors


def _root(module: str, name: str) -> type[BaseException]:
    kind = getattr(importlib.import_module(module), name)
    assert isinstance(kind, type) and issubclass(kind, BaseException)
    return kind


def test_every_streams_root_the_cli_names_exists() -> None:
    roots = {name: _root(module, name) for module, name in STREAMS_ERRORS}
    assert {"KafkaStreamError", "DeltaStreamError", "CdcError", "LandingError"} <= set(roots)
    assert set(roots.values()) <= set(known_errors())  # imported above, so known now


@pytest.mark.parametrize(("module", "name"), STREAMS_ERRORS)
def test_a_streams_error_prints_one_line_and_exits_1(
    module: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kind = _root(module, name)
    error = kind("table `ads_totals`: topic `mv.totals` could not be created")
    assert report(error, verbose=False) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "`ads_totals`" in err
    assert "Traceback" not in err


def test_cdc_errors_keep_their_table_and_verbose_shows_the_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from streams.cdc.errors import KTableError, PublishError

    try:
        raise PublishError("table `ads_totals`: no Delta table", topic="mv.t", table="ads_totals")
    except PublishError as e:
        assert report(e, verbose=True) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().endswith("error: table `ads_totals`: no Delta table")
    assert report(KTableError("topic `mv.t` does not exist", topic="mv.t"), verbose=False) == 1
    assert capsys.readouterr().err == "error: topic `mv.t` does not exist\n"


def test_warehouse_errors_exit_with_their_code_and_others_are_not_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from warehouse.runtime.errors import SessionStartError

    assert report(SessionStartError("Spark could not start", master="local[2]"), verbose=False) == 2
    assert report(WarehouseError("run failed", table="t"), verbose=False) == 1
    assert capsys.readouterr().err == "error: Spark could not start\nerror: run failed\n"
    assert report(RuntimeError("a bug"), verbose=False) is None
    assert capsys.readouterr().err == ""
