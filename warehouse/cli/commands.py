"""The subcommands of `warehouse`; each takes the parsed arguments and returns an exit code."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from streams.sessions import is_connect
from warehouse.cli.broker import load_settings
from warehouse.cli.errors import UsageError
from warehouse.cli.table_tests import cmd_test as cmd_test
from warehouse.spec.paths import broker_dir
from warehouse.spec.table import DEFAULT_CLUSTER

if TYPE_CHECKING:
    from warehouse.project import Project
    from warehouse.runtime.class_archive import ClassArchive
    from warehouse.runtime.session import Run

logger = logging.getLogger(__name__)


def _out(text: str) -> None:
    print(text, flush=True)


def load_project(args: argparse.Namespace) -> Project:
    from warehouse.project import Project

    remote = getattr(args, "remote", None)  # `run --remote sc://...` wins over `spark.remote`
    return Project.load(args.project, env=args.env, **({"spark__remote": remote} if remote else {}))


def _bootstrap(project: Project, cluster: str = DEFAULT_CLUSTER) -> str:
    """The bootstrap of one of the project's Kafka clusters (`--cluster`); an `embedded`
    default one starts the bundled broker on demand."""
    from warehouse.runtime.bootstrap import resolve_bootstrap

    kafka = project.config.kafka
    if cluster not in kafka.cluster_names:
        raise UsageError(
            f"`--cluster {cluster}`: conf/{project.env}.yml declares no such Kafka cluster "
            f"(clusters: {', '.join(f'`{c}`' for c in kafka.cluster_names)}). Name one of "
            "them, or add it under `kafka.clusters`."
        )
    if cluster != DEFAULT_CLUSTER:
        return kafka.clusters[cluster].bootstrap
    bootstrap = resolve_bootstrap(project, start=True)
    assert bootstrap is not None  # start=True resolves `embedded` or raises
    return bootstrap


def _session(project: Project, *, run: Run | None = None) -> Any:
    from warehouse.runtime.catalog import session_settings
    from warehouse.runtime.session import get_session

    return get_session(
        session_settings(project),
        object_storage=not storage.is_local(project.root),
        run=run,
    )


def cmd_plan(args: argparse.Namespace) -> int:
    from warehouse.compile.plan import build_plan, render

    project = load_project(args)
    plans = build_plan(project, layer=args.layer, tables=args.table)
    _out(render(plans, "json" if args.json else args.format, changes=project.changes()))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from warehouse.compile.strategy import may_land_in_arrow
    from warehouse.runtime.locks import holding
    from warehouse.runtime.pipeline import refuse_unrunnable
    from warehouse.runtime.refresh import refresh_selection

    if args.refresh and args.table:
        raise UsageError("`--refresh T[,U]` names the tables to run, as `--table` does; give one.")
    if args.full_refresh and args.full_refresh_all:
        raise UsageError("`--full-refresh T[,U]` and `--full-refresh-all`: give one.")
    if args.allow_data_loss and not (args.full_refresh or args.full_refresh_all):
        raise UsageError(
            "`--allow-data-loss` lets a full refresh go on where a topic no longer holds what "
            "a table was read from; give it with `--full-refresh T[,U]` or `--full-refresh-all`."
        )
    project = load_project(args)
    tables = args.refresh or args.table
    refresh = {"full_refresh": args.full_refresh or (), "full_refresh_all": args.full_refresh_all}
    selection = refresh_selection(project, layer=args.layer, tables=tables, **refresh)
    # Held and checked before Spark starts, so that a table another process runs, or one
    # whose checkpoint cannot go on, is refused in a moment; a full refresh resets first.
    with holding(project, selection.names, doing="run"):
        if not selection.reset:
            refuse_unrunnable(project, selection.names)
        # A run that ends, of tables whose records pass by the JVM, gets a JVM that
        # compiles with C1 alone (docs/decisions/0052); one that keeps running, a JVM
        # that saves C2 for its hottest code (docs/decisions/0056).
        run: Run | None = "continuous"
        if args.once:
            parse = project.config.engines.parse
            landing = all(may_land_in_arrow(project.tables[n], parse) for n in selection.names)
            run = "landing_once" if landing else None
        spark = _session(project, run=run)
        pipeline = project.pipeline(
            spark,
            args.layer,
            tables,
            progress=_out,
            allow_data_loss=args.allow_data_loss,
            **refresh,
        )
        results = pipeline.run(once=args.once)
    written = sum(r.rows_written for r in results)
    _out(f"done: {len(results)} table(s), {written} rows written")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from warehouse.runtime.status import render_status, status

    project = load_project(args)
    rows = status(project, layer=args.layer, tables=args.table)
    _out(json.dumps({"tables": rows}, indent=2, default=str) if args.json else render_status(rows))
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    from warehouse.ui import serve

    project = load_project(args)
    if not args.verbose:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per refresh
    _out(f"pipeline page of {project.path} at http://{args.host}:{args.port}/ (Ctrl-C stops it)")
    serve(project, port=args.port, host=args.host)
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    from warehouse.runtime.recover import recover

    project = load_project(args)
    done = recover(project, args.table)
    first = (
        f"replays its newest batch ({done['batch_id']}, from "
        f"{json.dumps(done['starting_offsets'])}: what the table has is kept, what the batch "
        "had not finished is written) and goes on from "
        if done["replays"]
        else "starts from "
    )
    _out(
        f"{args.table}: checkpoint {done['checkpoint']} rebuilt from the table's log; the "
        f"next run {first}{json.dumps(done['ending_offsets'])}. Run `warehouse run --table "
        f"{args.table}`."
    )
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from warehouse.runtime.recover import reset

    if not args.yes:
        raise UsageError(
            f"`reset` deletes the table `{args.table}`, its quarantine and its checkpoint; "
            "add `--yes` to confirm."
        )
    project = load_project(args)
    # With `catalog:`, the names go with the table: that needs the session's catalog.
    spark = _session(project) if project.config.catalog is not None else None
    removed = reset(project, args.table, spark=spark)
    _out(f"{args.table}: removed " + (", ".join(removed) if removed else "nothing (already empty)"))
    readers = [
        r
        for r in project.graph.stream_readers(args.table)
        if storage.exists(project.checkpoint_path(r))
    ]
    if removed and readers:
        names = ", ".join(f"`{r}`" for r in readers)
        _out(
            f"note: {names} read `{args.table}` as a stream, directly or not; their "
            "checkpoints hold positions in the table just removed, so they cannot go on "
            "until they are rebuilt from the new one: `warehouse run --full-refresh "
            f"{','.join(readers)}`."
        )
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from warehouse.templates import scaffold

    created = scaffold(Path(args.dir))
    _out(f"created a warehouse project in {args.dir} ({len(created)} files); next:")
    _out(f"  warehouse plan --project {args.dir}")
    _out(f"  then the first run in {Path(args.dir) / 'README.md'}: produce, run, status, consume")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    try:
        from warehouse.quality.check import run_checks
    except (ImportError, AttributeError):
        _err("`warehouse check` needs warehouse.quality.run_checks, which is not installed yet.")
        return 1
    project = load_project(args)
    report = run_checks(
        project,
        layer=None if args.layer == "all" else args.layer,
        table=args.table,
        report_dir=args.report,
        incremental=args.incremental,
    )
    _out(report.summary_text())
    return int(report.exit_code)


def _one_table_path(args: argparse.Namespace) -> tuple[Project, str]:
    project = load_project(args)
    if args.table not in project.tables:
        from warehouse.compile.plan import select_tables

        select_tables(project, tables=[args.table])  # raises the located error
    return project, str(project.table_path(args.table))


def _maintenance_engine(project: Project) -> tuple[Any, Any]:
    """(Delta engine, session) for maintenance: `python` needs no Spark (delta-rs); `auto`
    and `native` start the project's session and use delta-spark where it resolves, so a
    table is compacted by the engine that writes it."""
    from streams.delta import delta_engine

    setting = project.config.engines.delta
    if setting == "python":
        return delta_engine("python"), None
    from warehouse.runtime.engines import resolve_engine

    spark = _session(project)
    return delta_engine(resolve_engine(spark, "delta", setting)), spark


def cmd_optimize(args: argparse.Namespace) -> int:
    project, path = _one_table_path(args)
    engine, spark = _maintenance_engine(project)
    metrics = engine.optimize(spark, path)
    logger.info("%s: optimize metrics %s", args.table, json.dumps(metrics, default=str))
    _out(
        f"{args.table}: optimize compacted {metrics.get('numFilesRemoved', 0)} file(s) into "
        f"{metrics.get('numFilesAdded', 0)} in {path} ({engine.name})"
    )
    return 0


def cmd_vacuum(args: argparse.Namespace) -> int:
    from warehouse.runtime.maintenance import vacuum

    project, path = _one_table_path(args)
    used: list[Any] = []

    def engine() -> tuple[Any, Any]:
        used[:] = _maintenance_engine(project)
        return used[0], used[1]

    removed = vacuum(
        project,
        args.table,
        retention_hours=args.retention_hours,
        force=args.force,
        engine=engine,
    )
    _out(f"{args.table}: vacuum removed {len(removed)} file(s) from {path} ({used[0].name})")
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    from warehouse.cli.broker import cmd_broker as broker

    return broker(args, _out)


def cmd_demo(args: argparse.Namespace) -> int:
    """Find (or start) the embedded broker on the configured port, run the demo once or
    `--continuous`, and stop the broker again if it started it."""
    from warehouse.demo import check_demo_project, demo_broker, run_demo
    from warehouse.generate import GenerateArgumentError
    from warehouse.runtime.catalog import session_settings
    from warehouse.runtime.session import get_session

    events, seed, rate = args.events, args.seed, args.rate
    if events < 0 or rate <= 0:
        raise GenerateArgumentError(
            f"`--events` must be >= 0 and `--rate` > 0 (got `{events}` and `{rate}`); "
            "e.g. `warehouse demo --events 3000` or `warehouse demo --continuous --rate 20`."
        )
    project = load_project(args)
    check_demo_project(project)
    _out(
        f"warehouse demo: project {project.path}, {len(project.tables)} tables, root {project.root}"
    )
    with demo_broker(project) as (bootstrap, embedded):
        _out("starting Spark ...")
        spark = get_session(
            session_settings(project),
            app_name="warehouse-demo",
            object_storage=not storage.is_local(project.root),
            run="continuous" if args.continuous else None,
        )
        if not is_connect(spark):  # a Connect server's log level is the server's
            spark.sparkContext.setLogLevel("FATAL")  # the demo prints its own progress and errors
        if args.continuous:
            from warehouse.demo.continuous import run_continuous

            return run_continuous(
                project,
                spark,
                bootstrap=bootstrap,
                rate=rate,
                seed=seed,
                initial_events=events,
                delete_old_topics=embedded,
                out=_out,
            )
        result = run_demo(
            project,
            spark,
            bootstrap=bootstrap,
            events=events,
            seed=seed,
            delete_old_topics=embedded,
            out=_out,
        )
    if result.exit_code:
        _err("the checks failed; see the report above")
    return result.exit_code


def cmd_generate(args: argparse.Namespace) -> int:
    """Produce the example's events to the project's Kafka (the embedded broker on demand)."""
    import datetime as dt

    from warehouse.generate import (
        GenerateArgumentError,
        ShopGenerator,
        check_generate_project,
        ensure_topics,
        generate,
        produce_records,
    )

    if args.events < 0 or (args.rate is not None and args.rate <= 0):
        raise GenerateArgumentError(
            f"`--events` must be >= 0 and `--rate` > 0 (got `{args.events}` and `{args.rate}`); "
            "e.g. `warehouse generate --events 3000 --rate 20`."
        )
    project = load_project(args)
    check_generate_project(project)
    bootstrap = _bootstrap(project)

    client = project.config.kafka.client_config()
    ensure_topics(bootstrap, client_config=client)
    if args.rate:
        gen = ShopGenerator(
            seed=args.seed, start=dt.datetime.now(dt.UTC), seconds_per_event=1.0 / args.rate
        )
        records = gen.records(args.events)
        _out(f"producing {args.events} events at {args.rate:g}/s to {bootstrap}")
    else:
        records = iter(generate(args.events, seed=args.seed))
    stats = produce_records(
        bootstrap,
        records,
        pace_from=0.0 if args.rate else None,
        client_config=client,
        progress=lambda s: _out(f"  {s.line()}"),
    )
    _out(stats.line())
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    """JSON lines to a topic of the project's Kafka (the embedded broker on demand)."""
    from warehouse.cli.topics import open_input, produce_lines, read_json_lines

    project = load_project(args)
    lines, source = open_input(args.input)
    records = read_json_lines(lines, source=source, key=args.key)
    bootstrap = _bootstrap(project, args.cluster)
    sent = produce_lines(
        bootstrap,
        args.topic,
        records,
        client_config=project.config.kafka.client_config(cluster=args.cluster),
    )
    keyed = f", keyed by `{args.key}`" if args.key else ""
    _out(f"produced {sent} record(s) to topic `{args.topic}` at {bootstrap}{keyed}")
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    """Print a topic of the project's Kafka (read_committed), e.g. a published view."""
    from warehouse.cli.topics import consume_topic

    if (args.max is not None and args.max < 1) or args.timeout < 0:
        raise UsageError(
            f"`--max` must be >= 1 and `--timeout` >= 0 (got `{args.max}` and `{args.timeout}`); "
            "e.g. `warehouse consume --topic T --from-beginning --max 10 --timeout 5`."
        )
    project = load_project(args)
    bootstrap = _bootstrap(project, args.cluster)
    read = consume_topic(
        bootstrap,
        args.topic,
        client_config=project.config.kafka.client_config(cluster=args.cluster),
        from_beginning=args.from_beginning,
        max_records=args.max,
        idle_timeout=args.timeout,
        out=_out,
    )
    _err(f"consumed {read} record(s) from topic `{args.topic}` at {bootstrap}")
    return 0


def cmd_mirror(args: argparse.Namespace) -> int:
    from warehouse.runtime import mirror  # the runtime package imports pyspark

    # MirrorMaker needs the settings only: a folder with just `conf/` will do.
    project_dir, config = load_settings(args.project, args.env)

    def start_embedded() -> str:
        # A flow of the default cluster, the bundled broker: started on demand, as for
        # `produce` and `consume`.
        from streams.broker.launcher import ensure_broker

        emb = config.kafka.embedded
        data_dir = broker_dir(project_dir, config.root_location(project_dir), emb.data_dir)
        return ensure_broker(data_dir, host=emb.host, port=emb.port, config=dict(emb.config))

    return mirror.run(
        config,
        root=config.root_location(project_dir),
        project_dir=project_dir,
        environ=os.environ,
        start_embedded=start_embedded,
        out=_err,
    )


def cmd_jars(args: argparse.Namespace) -> int:
    from warehouse.runtime.jars import (
        cached_jars,
        default_cache_dir,
        fetch_jars,
        installed_packages,
        manifest_path,
    )

    cache = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    packages = installed_packages()
    if args.action == "show":
        jars = cached_jars(cache, packages)
        _out(f"packages: {', '.join(packages.coordinates)}")
        _out(f"manifest: {manifest_path(cache, packages)}")
        _out("cached: " + ("no" if jars is None else f"{len(jars.files)} jar(s)"))
        _out("class archive: " + _class_archive_line())
        _out(f"local file system: {_local_fs_line(cache)}")
        _out(f"object storage: {_storage_jars_line(cache)}")
        return 0 if jars is not None else 1
    if cached_jars(cache, packages) is None:
        _out(f"resolving {', '.join(packages.coordinates)} from Maven (once) ...")
    jars = fetch_jars(cache, packages)
    _out(
        f"native jars: {len(jars.files)} file(s), kafka={jars.kafka}, delta={jars.delta} "
        f"({manifest_path(cache, packages)})"
    )
    _fetch_storage_jars(cache)
    _build_local_fs(cache, jars.files)
    if not args.no_class_archive:
        _fetch_class_archive()
    return 0


def _storage_jars_line(cache: Path) -> str:
    from warehouse.runtime.jars import cached_storage_jars, installed_storage_packages

    packages = installed_storage_packages()
    files = cached_storage_jars(cache, packages)
    if packages is None or files is None:
        return "not cached (`warehouse jars fetch` caches `hadoop-aws` and the AWS SDK)"
    return f"{', '.join(packages.coordinates)}: {len(files)} jar(s)"


def _fetch_storage_jars(cache: Path) -> None:
    """Cache `hadoop-aws` and its AWS SDK; without them sessions use local paths only,
    so a failure is said and the fetch goes on."""
    from warehouse.runtime.errors import JarsError
    from warehouse.runtime.jars import (
        cached_storage_jars,
        fetch_storage_jars,
        installed_storage_packages,
    )

    packages = installed_storage_packages()
    if packages is not None and cached_storage_jars(cache, packages) is None:
        _out(f"resolving {', '.join(packages.coordinates)} from Maven (once; about 700 MB) ...")
    try:
        files = fetch_storage_jars(cache, packages)
    except JarsError as e:
        _err(f"object-storage jars not cached ({e}); sessions will use local paths only")
        return
    _out(f"object-storage jars: {len(files)} file(s)")


def _build_local_fs(cache: Path, native: tuple[Path, ...]) -> None:
    """Build the local file system that sets permissions without a process, and Delta's
    log store for local paths against the `native` jars' delta-storage (before the class
    archive: the JVMs of local sessions put their jars on their class path)."""
    from warehouse.runtime import local_fs

    jar = local_fs.build(cache)
    _out(
        f"local file system without chmod processes: {jar}"
        if jar is not None
        else "local file system: Hadoop's (no `javac` to build the framework's; see the log)"
    )
    delta_storage = local_fs.delta_storage(",".join(str(f) for f in native))
    if delta_storage is None:
        return
    store = local_fs.build_log_store(cache, delta_storage)
    _out(
        f"Delta log store for local paths: {store}"
        if store is not None
        else "Delta log store for local paths: Delta's (see the log)"
    )


def _local_fs_line(cache: Path) -> str:
    """What `jars show` says of the local file system sessions get."""
    from warehouse.runtime import local_fs

    jar = local_fs.built_jar(cache)
    return (
        f"{local_fs.FS_CLASS} ({jar})" if jar else "Hadoop's (`warehouse jars fetch` builds ours)"
    )


def _class_archive_line() -> str:
    """What `jars show` says of the class archive of this Java and Spark."""
    from warehouse.runtime.class_archive import archive_dir, session_archive

    cache, archive = session_archive(os.environ)
    if archive is None:
        return f"none for this Java and Spark in {archive_dir(cache)} (`warehouse jars fetch`)"
    return f"{archive.path} ({_covers(archive)}, for {archive.record.get('java')})"


def _covers(archive: ClassArchive) -> str:
    """An archive's size and the work its classes were loaded by."""
    ran = archive.record.get("exercised")
    return f"{archive.size >> 20} MB" + (f"; {', '.join(ran)}" if ran else "")


def _fetch_class_archive() -> None:
    """Make the class archive local sessions start with, once per Java and Spark; a
    failure is reported and sessions start without one."""
    from warehouse.runtime.class_archive import make_archive, session_archive
    from warehouse.runtime.errors import ClassArchiveError

    cache, archive = session_archive(os.environ)
    if archive is None:
        _out("making the class archive local sessions start with (once, about 45 s) ...")
        try:
            archive = make_archive(cache)
        except ClassArchiveError as e:
            _err(f"no class archive made ({e}); local sessions start without one")
            return
    _out(f"class archive: {archive.path} ({_covers(archive)})")


def cmd_bundle(args: argparse.Namespace) -> int:
    from warehouse.bundle import build_bundle

    result = build_bundle(
        args.output,
        venv=args.venv,
        include_pyspark=args.with_pyspark,
        wheels=args.wheel,
        python_prefix=args.python_prefix,
        force=args.force,
    )
    mib = result.size_bytes / 2**20
    rebuilt = ", ".join(result.editable) or "none"
    _out(f"wrote {result.path} ({mib:.0f} MiB); editable installs packed as wheels: {rebuilt}")
    _out(f"bin/python links to {result.base_python}: the executors need that interpreter there")
    _out("ship it with: spark-submit " + " ".join(result.spark_submit_args()) + " ...")
    return 0


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
