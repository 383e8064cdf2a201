"""The runtime's own errors, each a `WarehouseError` naming the table and what to do (no
Spark: a publish target is checked when the table compiles, a target when it asks for its
query id)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import Project
from warehouse.compile import CompileError, PublishTarget, Targets
from warehouse.compile.plan import plan_table
from warehouse.compile.program import publish_target
from warehouse.errors import WarehouseError, root_cause_line
from warehouse.runtime.errors import CheckpointError, QueryFailedError
from warehouse.runtime.failures import build_failure, query_failure
from warehouse.runtime.writer import BatchStats
from warehouse.templates import scaffold


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """The scaffolded project: `ods_events` (Kafka), `dwd_events`, `ads_event_totals`
    (published to `mv.event_totals`)."""
    scaffold(tmp_path / "shop")
    return Project.load(tmp_path / "shop")


def test_a_publishing_table_without_bootstrap_names_the_table_and_topic(project: Project) -> None:
    name = "ads_event_totals"
    defn = project.tables[name]
    with pytest.raises(CompileError) as e:
        publish_target(project, defn, None)
    assert e.value.table == name and e.value.exit_code == 2
    assert "`ads_event_totals` publishes to the topic `mv.event_totals`" in str(e.value)
    assert "kafka.bootstrap" in str(e.value)
    # With one, it compiles; a table that publishes nothing needs none.
    assert isinstance(publish_target(project, defn, "h:9092"), PublishTarget)
    assert publish_target(project, project.tables["dwd_events"], None) is None


@pytest.mark.parametrize(
    ("name", "fix"),
    [
        ("ods_events", "`warehouse recover --table ods_events`"),
        ("dwd_events", "`warehouse reset --table dwd_events --yes`"),
    ],
)
def test_a_checkpoint_without_query_id_is_a_checkpoint_error_saying_the_fix(
    project: Project, name: str, fix: str
) -> None:
    plan = plan_table(project, name)
    Path(plan.checkpoint_path).mkdir(parents=True)  # a checkpoint folder, its metadata lost
    targets = Targets.of_table(project, name, engine="python")
    with pytest.raises(CheckpointError) as e:
        targets.app_id()
    assert isinstance(e.value, WarehouseError)
    assert (e.value.table, e.value.path) == (name, plan.checkpoint_path)
    assert f"Table `{name}`: the checkpoint `{plan.checkpoint_path}`" in str(e.value)
    assert fix in str(e.value)
    # Once Spark's metadata is there, the id is the table's app id.
    (Path(plan.checkpoint_path) / "metadata").write_text('{"id":"q-1"}\n')
    assert targets.app_id() == f"{name}:q-1"


def test_a_build_failure_names_the_table_its_inputs_and_the_cause() -> None:
    class DeltaError(Exception):  # a foreign error whose text does not say what it is
        pass

    cause = DeltaError("Kernel error: Json error: unexpected 'o'\n   0: <unknown>")
    err = build_failure("dwd_x", "dwd", cause, inputs=["table `ods_x` at /w/tables/ods_x"])
    assert isinstance(err, QueryFailedError) and err.exit_code == 1
    assert (err.table, err.layer) == ("dwd_x", "dwd")
    assert str(err).startswith(
        "Table `dwd_x` (layer `dwd`): its query could not be built: DeltaError: Kernel error: "
        "Json error: unexpected 'o'; its inputs: table `ods_x` at /w/tables/ods_x. "
    )
    named = build_failure("dwd_x", "dwd", ValueError("ValueError: bad"))
    assert "built: ValueError: bad. Repair" in str(named)


def test_state_that_no_longer_fits_names_the_tables_to_start_over(project: Project) -> None:
    """Spark's refusal of a checkpoint's state (quoted from the STREAM_FAILED text it
    comes in) says to reset the table and every table reading it as a stream."""
    plan = plan_table(project, "dwd_events")
    text = (
        "[STREAM_FAILED] Query [id = q, runId = r] terminated with exception: "
        "[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE] Provided value schema does not match "
        "existing state value schema.\nPlease check number and type of fields."
    )
    err = query_failure(
        plan, BatchStats(), None, RuntimeError(text),
        readers=project.graph.stream_readers("dwd_events"),
    )  # fmt: skip
    assert (err.table, err.exit_code) == ("dwd_events", 1)
    assert str(err) == (
        f"Table `dwd_events` (layers/dwd/events.yml): the state its checkpoint "
        f"{plan.checkpoint_path} keeps no longer fits its definition "
        "([STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE] Provided value schema does not match "
        "existing state value schema): its aggregation, deduplication, join or their keys "
        "changed since that state was written. Nothing was written. To rebuild the table "
        "from its input: `warehouse run --full-refresh dwd_events`: it resets the table "
        "and the tables that read it as a stream (`ads_event_totals`), whose "
        "checkpoints hold positions in the table being replaced, and "
        "reads `ods_events` again from the start. To keep the table as it is, restore the "
        "definition the checkpoint was written with."
    )
    other = query_failure(plan, BatchStats(), None, RuntimeError("[OTHER] no"))
    assert "resumes where the last committed batch ended" in str(other)


def test_a_replaced_input_table_names_the_tables_to_start_over(project: Project) -> None:
    """delta-spark's refusal to read on in a table re-created at its path (the Python
    Delta source's is tested with the pipeline) says to reset the reader and its readers."""
    plan = plan_table(project, "dwd_events")
    text = (
        "[STREAM_FAILED] Query [id = q, runId = r] terminated with exception: "
        "[DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE] The streaming query was reading "
        "from an unexpected Delta table (id = 'b'). \nIt used to read from another Delta "
        "table (id = 'a') according to checkpoint."
    )
    err = query_failure(
        plan, BatchStats(), None, RuntimeError(text),
        readers=project.graph.stream_readers("dwd_events"),
    )  # fmt: skip
    assert str(err) == (
        "Table `dwd_events` (layers/dwd/events.yml): its input table `ods_events` was "
        "replaced (reset, or deleted and written again) since its checkpoint "
        f"{plan.checkpoint_path} last read it, and the position the checkpoint holds is in "
        "the old table. Nothing was written. To rebuild the table from its input: "
        "`warehouse run --full-refresh dwd_events`: it resets the table and the tables that "
        "read it as a stream (`ads_event_totals`), whose checkpoints hold positions in the "
        "table being replaced, and reads `ods_events` again from the start."
    )


def test_the_root_cause_of_a_jvm_error_is_its_innermost_caused_by() -> None:
    text = (
        "An error occurred while calling o63.load.\n"
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(x.scala:1)\n"
        "Caused by: com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'not'\n"
        " at [Source: REDACTED]\n"
    )
    assert root_cause_line(text) == "JsonParseException: Unrecognized token 'not'"
    assert root_cause_line("Traceback (most recent call last):\nValueError: bad") == (
        "ValueError: bad"
    )
    assert root_cause_line("no exception named here\nsecond") == "no exception named here"


def test_a_column_whose_type_changed_says_where_to_change_it_back(project: Project) -> None:
    """A landing table's column types come from the payload schema it reads with; a
    table with a query casts in the query (tested with the pipeline)."""
    from streams.delta.errors import DeltaSchemaError

    plan = plan_table(project, "ods_events")
    schema_error = DeltaSchemaError(
        "Delta table `t`: column `amount` has type ...",
        path=plan.table_path,
        column="amount",
        types=("double", "string"),
    )
    err = query_failure(
        plan, BatchStats(error=schema_error), None, None,
        readers=project.graph.stream_readers("ods_events"),
    )  # fmt: skip
    assert (err.table, err.exit_code) == ("ods_events", 1)
    assert str(err) == (
        "Table `ods_events` (layers/ods/events.yml): column `amount` has type `double` in "
        f"the table {plan.table_path} but `string` in the batch, and a table does not "
        "change a column's type. Nothing was written. To rebuild the table from its input: "
        "`warehouse run --full-refresh ods_events`: it resets the table and the tables that "
        "read it as a stream (`dwd_events`, `ads_event_totals`), whose checkpoints hold "
        "positions in the table being replaced, and reads its input "
        "again from the start. To keep the table as it is, give `amount` back its type in "
        "the payload schema the table reads its records with (kafka `events` as json "
        "(events))."
    )


def test_a_changed_partition_by_says_how_to_restore_or_rebuild(project: Project) -> None:
    from streams.delta.errors import DeltaSchemaError

    plan = plan_table(project, "dwd_events")
    readers = project.graph.stream_readers("dwd_events")
    changed = DeltaSchemaError("t", path=plan.table_path, partitioning=(["kind"], ["user_id"]))
    err = query_failure(plan, BatchStats(error=changed), None, None, readers=readers)
    assert str(err) == (
        f"Table `dwd_events` (layers/dwd/events.yml): the table {plan.table_path} is "
        "partitioned by [kind] but its sink asks for partitions by [user_id], and a table "
        "keeps the partitioning it was created with. Nothing was written. To rebuild the "
        "table from its input: `warehouse run --full-refresh dwd_events`: it resets the "
        "table and the tables that read it as a stream (`ads_event_totals`), whose "
        "checkpoints hold positions in the table being replaced, and reads `ods_events` "
        "again from the start. To keep the table as it is, set `partition_by: [kind]` in its "
        "sink again."
    )
    unpartitioned = DeltaSchemaError("t", path=plan.table_path, partitioning=([], ["kind"]))
    err = query_failure(plan, BatchStats(error=unpartitioned), None, None, readers=readers)
    assert "is not partitioned but its sink asks for partitions by [kind]" in str(err)
    assert str(err).endswith("To keep the table as it is, remove `partition_by` from its sink.")
