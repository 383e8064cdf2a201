"""`warehouse ui` in a real headless browser (Debian's chromium through its chromedriver)
while `warehouse run` runs the two-layer project in another process: real broker, real
Spark, real Delta, as a user sees it.

The page shows the tables by layer before anything ran; once the run starts, a table
goes to running and its rows grow as records arrive, without a reload; a click on a
table's node shows its definition and quarantine; when the run stops, the page says so.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.kafka.admin import produce
from tests.integration.runtime.helpers import order, orders_project
from tests.integration.runtime.runs import REPO, stop, warehouse_run
from tests.support.ports import free_port

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

CY = "const c = [...document.querySelectorAll('#graph, #graph *')].find(e => e._cyreg); "
"""The page's Cytoscape instance (Cytoscape.js keeps it on its container)."""


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless chromium, the system's own (scripts/ensure-test-tools.sh installs it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(
            f"{CHROMIUM} and {CHROMEDRIVER} are needed: run scripts/ensure-test-tools.sh "
            "(Debian packages `chromium`, `chromium-driver`)",
            pytrace=False,
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait(check: Callable[[], Any], what: str, *, timeout: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # noqa: BLE001  # the page is still drawing: ask again
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.3)
    tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(f"gave up waiting for {what} (last seen: {last!r})\n{tail}")


def nodes(driver: Any) -> dict[str, dict[str, Any]]:
    """The graph's nodes as Cytoscape has drawn them: id → label, layer, state, rows, place."""
    got = driver.execute_script(
        CY + "return c ? c._cyreg.cy.nodes().map(n => ({id: n.id(), label: n.data('label'), "
        "layer: n.data('layer') || null, state: n.data('state') || null, "
        "rows: n.data('rows'), pos: n.renderedPosition()})) : [];"
    )
    return {n["id"]: n for n in got}


def details(driver: Any) -> dict[str, str]:
    """The details panel's parts, id → text, read in one go: the page renders the panel anew
    every second, so an element found by one call may be gone by the next."""
    return driver.execute_script(  # type: ignore[no-any-return]
        "return Object.fromEntries([...document.querySelectorAll('#details [id^=\"details-\"]')]"
        ".map(e => [e.id, e.innerText]));"
    )


def click_node(driver: Any, name: str) -> None:
    """A real mouse click on the node's place in the canvas."""
    from selenium.webdriver.common.action_chains import ActionChains

    graph = driver.find_element("id", "graph")
    pos = nodes(driver)[name]["pos"]
    size = graph.size
    ActionChains(driver).move_to_element_with_offset(
        graph, int(pos["x"] - size["width"] / 2), int(pos["y"] - size["height"] / 2)
    ).click().perform()


def test_the_page_follows_a_run_live(browser, broker, unique, tmp_path: Path) -> None:
    topic, proj = orders_project(tmp_path / "proj", broker.bootstrap, unique, engine="python")
    produce(
        broker.bootstrap,
        topic,
        [("a", order("o1", "u1", 1.0, 0)), ("b", order("o2", "u2", 2.0, 1)),
         ("n", order(None, "u3", 3.0, 2))],
    )  # fmt: skip
    port = free_port()
    ui_log = tmp_path / "ui.log"
    with ui_log.open("w") as out:
        ui = subprocess.Popen(
            [sys.executable, "-m", "warehouse", "--project", str(proj), "ui", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        url = f"http://127.0.0.1:{port}/"

        def page_up() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait(page_up, "the page's server", timeout=60, log=ui_log)
        browser.get(url)
        banner = lambda: browser.find_element("id", "run-banner").text  # noqa: E731
        wait(lambda: banner().startswith("Never run"), "the never-run banner", timeout=30)
        drawn = wait(lambda: len(nodes(browser)) == 4 and nodes(browser), "the graph", timeout=30)
        assert {n: (v["label"], v["layer"], v["state"]) for n, v in drawn.items()} == {
            "layer:ods": ("ODS", None, None),
            "layer:dwd": ("DWD", None, None),
            "ods_orders": ("ods_orders\nnever run · - rows", "ods", "never run"),
            "dwd_orders": ("dwd_orders\nnever run · - rows", "dwd", "never run"),
        }
        # A column per layer, ODS first, each under its layer's name.
        x = {n: round(v["pos"]["x"]) for n, v in drawn.items()}
        assert x["layer:ods"] == x["ods_orders"] < x["layer:dwd"] == x["dwd_orders"]
        browser.execute_script("window.stillTheSamePage = true;")

        run_log = tmp_path / "run.log"
        with warehouse_run(proj, run_log) as run:
            ods = lambda: nodes(browser)["ods_orders"]  # noqa: E731
            # Hang guards, not timings: beside the rest of the suite a query's Python worker
            # can miss Spark's 10 s to connect back, and the run starts it again after
            # pauses of 5, 10, 20, ... s (warehouse.runtime.failures.RetryPolicy).
            wait(lambda: ods()["state"] == "running" and ods()["rows"] == 2,
                 "ods_orders running with 2 rows", timeout=600, log=run_log)  # fmt: skip
            assert banner().startswith(f"Running: pid {run.pid} on ")
            produce(broker.bootstrap, topic, [("c", order("o3", "u1", 4.0, 3))])
            wait(lambda: ods()["rows"] == 3 and "3 rows" in ods()["label"],
                 "ods_orders at 3 rows", timeout=300, log=run_log)  # fmt: skip
            assert browser.execute_script("return window.stillTheSamePage === true;")

            def clicked() -> bool:
                # The graph is redrawn every second: a click may land while it moves.
                click_node(browser, "ods_orders")
                time.sleep(1.5)
                return details(browser).get("details-title") == "ods_orders"

            wait(clicked, "the details of ods_orders", timeout=30)
            shown = details(browser)
            assert shown["details-title"] == "ods_orders", shown
            assert shown["details-quarantine"] == "1", shown
            reasons = shown["details-reasons"]
            assert "1 × " in reasons and "order_id" in reasons, reasons
            definition = shown["details-definition"]
            assert "layers/ods/orders.yml" in definition and "table: ods_orders" in definition
            assert "expect_column_values_to_not_be_null" in shown["details-expectations"], shown
            assert stop(run) == 0, run_log.read_text()[-3000:]

        wait(lambda: banner().startswith("Run stopped"), "the stopped banner", timeout=30)
        assert nodes(browser)["ods_orders"]["state"] == "stopped"
        assert details(browser)["details-state"] == "stopped"
        # Nothing changes now: the page keeps asking, and keeps the panel it shows (a reader's
        # selection and scroll stay).
        browser.execute_script(
            "performance.clearResourceTimings();"
            "document.getElementById('details-definition').keptByThePage = true;"
        )
        asked = "return performance.getEntriesByType('resource')" \
            ".filter(e => e.name.includes('_dash-update-component')).length;"  # fmt: skip
        wait(lambda: browser.execute_script(asked) >= 3, "three refreshes", timeout=60)
        assert browser.execute_script(
            "return document.getElementById('details-definition').keptByThePage === true;"
        )
        assert browser.execute_script("return window.stillTheSamePage === true;")
    finally:
        ui.terminate()
        ui.wait(30)
