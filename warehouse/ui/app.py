"""The pipeline page: a Dash app (Flask underneath) with the graph drawn by Cytoscape.js
(`dash-cytoscape`); both serve their scripts from their wheels, so the page needs no
network (docs/decisions/0035-pipeline-page-on-dash-and-cytoscape.md).

The page asks the server every `REFRESH_MS` for a `PipelineView.snapshot()` and redraws
the graph's states and labels, the table of tables and the run's banner; a table's
details (definition, quarantine, dead letters, expectation pass rates, recent batches)
show when its node or its row is clicked. The table of tables and the details are sent
again only when what they show changed: Dash mounts a new `children` afresh, which would
drop a reader's text selection and scroll every second. Every text goes in as a
component's text, which React escapes: a topic name or a reason is never markup.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import dash_cytoscape as cyto
import plotly.utils
from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update

from warehouse.ui.view import PipelineView

REFRESH_MS = 1000

STATE_COLOURS = {
    "running": "#2e9e44",
    "idle": "#3b7dd8",
    "stopped": "#8a8f98",
    "failed": "#d23c3c",
    "never-run": "#ffffff",
}

STYLESHEET: list[dict[str, Any]] = [
    {
        "selector": "node",
        "style": {
            "label": "data(label)",
            "text-wrap": "wrap",
            "text-valign": "center",
            "font-size": 11,
            "shape": "round-rectangle",
            "width": 190,
            "height": 46,
            "border-width": 2,
            "border-color": "#444",
        },
    },
    {
        "selector": "node.layer",
        "style": {
            "font-size": 15,
            "font-weight": "bold",
            "background-opacity": 0,
            "border-width": 0,
            "height": 24,
            "events": "no",
        },
    },
    {
        "selector": "edge",
        "style": {
            "curve-style": "bezier",
            "target-arrow-shape": "triangle",
            "width": 2,
            "line-color": "#9aa1ab",
            "target-arrow-color": "#9aa1ab",
        },
    },
    {"selector": "edge.static", "style": {"line-style": "dashed"}},
    {"selector": "node:selected", "style": {"border-width": 4, "border-color": "#111"}},
    *[
        {"selector": f"node.{state}", "style": {"background-color": colour}}
        for state, colour in STATE_COLOURS.items()
    ],
]


PAGE = """<!DOCTYPE html>
<html>
<head>{%metas%}<title>{%title%}</title>{%favicon%}{%css%}
<style>
#tables td, #tables th, #details-batches td, #details-batches th
  { padding: 3px 12px; border-bottom: 1px solid #e3e5e8; text-align: left; }
#tables tr:hover { background: #f4f7fb; }
.run { padding: 6px 10px; margin-bottom: 8px; border-radius: 4px; }
.run.running { background: #e3f5e7; } .run.stopped { background: #eceef1; }
.run.failed { background: #fbe3e3; } .run.never-run { background: #f6f6f6; }
td.state.running { color: #2e9e44; font-weight: bold; }
td.state.failed { color: #d23c3c; font-weight: bold; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
</style>
</head>
<body>{%app_entry%}<footer>{%config%}{%scripts%}{%renderer%}</footer></body>
</html>"""
"""Dash's page with the few styles of the tables and the banner (no stylesheet to fetch)."""


def _css(state: str) -> str:
    return state.replace(" ", "-")


def elements(view: PipelineView, snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """The graph's Cytoscape elements: a column per layer under its name, edges between
    the tables; each table labelled with its state and rows, and classed by its state."""
    graph = view.graph()
    columns = {n["layer"]: n["x"] for n in graph["nodes"]}
    out: list[dict[str, Any]] = [
        {
            "data": {"id": f"layer:{layer}", "label": layer.upper()},
            "position": {"x": x, "y": -70},
            "classes": "layer",
        }
        for layer, x in columns.items()
    ]
    for node in graph["nodes"]:
        row = snapshot["tables"][node["table"]]
        rows = "-" if row["rows"] is None else f"{row['rows']:,}"
        out.append(
            {
                "data": {
                    "id": node["table"],
                    "layer": node["layer"],
                    "label": f"{node['table']}\n{row['state']} · {rows} rows",
                    "state": row["state"],
                    "rows": row["rows"],
                },
                "position": {"x": node["x"], "y": node["y"]},
                "classes": _css(row["state"]),
            }
        )
    out += [
        {
            "data": {"source": e["upstream"], "target": e["downstream"]},
            "classes": e["kind"],
        }
        for e in graph["edges"]
    ]
    return out


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def _rates(rates: dict[str, float | None]) -> str:
    if not rates:
        return "-"
    return "; ".join(
        f"{name} {'-' if r is None else f'{r:.1%}'}" for name, r in sorted(rates.items())
    )


def table_rows(snapshot: dict[str, Any]) -> list[Any]:
    """The table of tables: one clickable row per table."""
    head = html.Tr(
        [
            html.Th(h)
            for h in (
                "table",
                "layer",
                "state",
                "last batch",
                "at",
                "rows in / written",
                "rows",
                "lag",
                "quarantine",
                "dead letters",
                "expectations passed",
            )
        ]
    )
    body = []
    for name, r in snapshot["tables"].items():
        last = r["last_batch"] or {}
        inout = f"{last['rows_in']:,} / {last['rows_written']:,}" if last else "-"
        body.append(
            html.Tr(
                [
                    html.Td(name),
                    html.Td(r["layer"]),
                    html.Td(r["state"], className=f"state {_css(r['state'])}"),
                    html.Td(_number(last.get("batch_id"))),
                    html.Td(last.get("at") or _number(r["last_commit"])),
                    html.Td(inout),
                    html.Td(_number(r["rows"])),
                    html.Td(_number(r["lag"])),
                    html.Td(_number(r["quarantine_rows"])),
                    html.Td(_progress(r["dead_letters"])),
                    html.Td(_rates(r["pass_rates"])),
                ],
                id={"type": "table-row", "table": name},
                n_clicks=0,
                style={"cursor": "pointer"},
            )
        )
    return [html.Thead(head), html.Tbody(body)]


def _progress(dead_letters: dict[str, Any] | None) -> str:
    return "-" if dead_letters is None else str(dead_letters["progress"])


def banner(run: dict[str, Any]) -> tuple[str, str]:
    """The run's line and its class: `running`, `stopped`, `failed` or `never-run`."""
    if run["running"]:
        procs = "; ".join(
            f"pid {p['pid']} on {p['host']} (`{p['command']}`, since {p['since']})"
            for p in run["processes"]
        )
        return f"Running: {procs}", "running"
    if run.get("ended") is None:
        return "Never run: no process has run these tables yet.", "never-run"
    how = "failed" if run["failed"] else "stopped"
    return (
        f"Run {how}: no process runs these tables now; the last run (pid {run['pid']}, "
        f"`{run['command']}`) ended at {run['ended']}.",
        how,
    )


def details_panel(view: PipelineView, name: str, row: dict[str, Any]) -> list[Any]:
    d = view.details(name)
    q = d["quarantine"]
    reasons = [
        html.Li(f"{r['count']} × {r['reason']} (batch {r['last_batch']})") for r in q["reasons"]
    ]
    dead = row["dead_letters"]
    heads = ["batch", "at", "rows in", "written", "quarantined"]
    heads += ["dead letters sent"] if dead else []
    batches = [
        html.Tr(
            [
                html.Td(b["batch_id"]),
                html.Td(b["at"]),
                html.Td(b["rows_in"]),
                html.Td(b["rows_written"]),
                html.Td(b["quarantined"]),
                *([html.Td(_number(b.get("dead_letters")))] if dead else []),
            ]
        )
        for b in reversed(row["batches"])
    ]
    dead_letters = []
    if dead:
        dead_letters = [
            html.P(
                ["dead letters to ", html.Code(dead["topic"]), ": ", dead["text"]],
                id="details-dead-letters",
            )
        ]
    return [
        html.H2(name, id="details-title"),
        html.P(
            [
                f"{d['layer'].upper()} · state ",
                html.B(row["state"], id="details-state"),
                f" ({row['reason']})" if row["reason"] else "",
            ]
        ),
        html.P(["quarantined rows: ", html.B(str(q["rows"]), id="details-quarantine")]),
        html.Ul(reasons, id="details-reasons"),
        *dead_letters,
        html.P(f"expectations passed: {_rates(row['pass_rates'])}", id="details-expectations"),
        html.H3("recent batches"),
        html.Table(
            [
                html.Thead(html.Tr([html.Th(h) for h in heads])),
                html.Tbody(batches),
            ],
            id="details-batches",
        ),
        html.H3("definition"),
        html.Div(
            [html.Div([html.Code(f["file"]), html.Pre(f["text"])]) for f in d["definition"]],
            id="details-definition",
        ),
    ]


def _fingerprint(components: list[Any]) -> str:
    rendered = json.dumps(components, cls=plotly.utils.PlotlyJSONEncoder, sort_keys=True)
    return hashlib.sha256(rendered.encode()).hexdigest()


def build_app(view: PipelineView) -> Dash:
    """The page of `view`'s project."""
    app = Dash(__name__, title="warehouse ui", update_title=None, serve_locally=True)
    app.index_string = PAGE
    project = view.project
    app.layout = html.Div(
        [
            html.H1(f"{project.path.name} ({project.env})"),
            html.Div(id="run-banner"),
            cyto.Cytoscape(
                id="graph",
                layout={"name": "preset", "fit": True, "padding": 20},
                stylesheet=STYLESHEET,
                elements=[],
                style={"width": "100%", "height": "460px", "border": "1px solid #ddd"},
                autoungrabify=True,
                maxZoom=1.0,
                userZoomingEnabled=False,
            ),
            html.Table(id="tables", style={"borderCollapse": "collapse", "marginTop": "1em"}),
            dcc.Store(id="selected"),
            dcc.Store(id="shown"),
            html.Div(id="details", style={"marginTop": "1em"}),
            dcc.Interval(id="tick", interval=REFRESH_MS),
        ],
        style={"fontFamily": "sans-serif", "margin": "1em"},
    )
    _callbacks(app, view)
    return app


def _callbacks(app: Dash, view: PipelineView) -> None:
    @app.callback(
        Output("graph", "elements"),
        Output("tables", "children"),
        Output("run-banner", "children"),
        Output("run-banner", "className"),
        Output("details", "children"),
        Output("shown", "data"),
        Input("tick", "n_intervals"),
        Input("selected", "data"),
        State("shown", "data"),
    )
    def refresh(_tick: int | None, selected: str | None, shown: dict | None) -> tuple[Any, ...]:
        snapshot = view.snapshot()
        line, kind = banner(snapshot["run"])
        details: list[Any] = [html.P("Click a table for its details.")]
        if selected in snapshot["tables"]:
            details = details_panel(view, selected, snapshot["tables"][selected])
        tables = table_rows(snapshot)
        now = {"tables": _fingerprint(tables), "details": _fingerprint(details)}
        shown = shown or {}
        return (
            elements(view, snapshot),
            tables if now["tables"] != shown.get("tables") else no_update,
            line,
            f"run {kind}",
            details if now["details"] != shown.get("details") else no_update,
            now,
        )

    @app.callback(
        Output("selected", "data"),
        Input("graph", "tapNodeData"),
        Input({"type": "table-row", "table": ALL}, "n_clicks"),
        State("selected", "data"),
        prevent_initial_call=True,
    )
    def select(node: dict[str, Any] | None, _clicks: list[int], current: str | None) -> Any:
        trigger = ctx.triggered_id
        if trigger == "graph":
            table = (node or {}).get("id", "")
            return table if table and not table.startswith("layer:") else no_update
        if isinstance(trigger, dict) and ctx.triggered and ctx.triggered[0]["value"]:
            return trigger["table"]
        return no_update if current else None
