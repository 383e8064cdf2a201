#!/usr/bin/env bash
# The whole suite (`make test`), as four pytest processes side by side. Most tests wait:
# on a Spark start-up, on a child process's life in the crash tests, on a broker, a
# Connect worker or a database; one process at a time leaves a third of the two cores
# idle, four keep them busy. Tests share servers and Spark sessions within a process
# (session fixtures), so the groups are whole directories or files:
#   crash    the crash tests (20+ lives of a child process per engine, each a fresh Spark
#            start-up; the soak of the continuous example under kills and a full disk), the
#            table tests (`warehouse test` of every table of the example), the CLI's own
#            tests (tests/integration/cli), the demo (checked against its independent
#            computation, and run continuously) and the CLI's runs on S3
#   servers  the standalone cluster (and the cluster shape: the example on its workers,
#            tables on S3, three Kafka nodes, and the crash test on that shape), on one
#            cluster and one set of Kafka nodes, and MirrorMaker 2
#   runtime  the rest of tests/integration/runtime (the CLI end-to-end runs, tables on
#            several clusters, named and federated, included)
#   rest     everything else: the unit tests, the broker and the framework against
#            Apache Kafka, Delta, Kafka, CDC, quality, Kafka Connect and PostgreSQL ->
#            Debezium
# The run is CPU-bound, so the groups are cut to take about the same CPU and end about
# together (docs/decisions/0041-four-test-processes.md). `rest`
# prints as it runs; each other group's output is printed once it is done, with its
# slowest tests. The exit status is the first failing group's, and every group's status
# is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."

# The run's scratch (tables, brokers' logs, the clusters' folders, Spark's local dirs) is
# under the temporary directory: 14 GB at its peak in a clean-clone run, a passing test's
# removed when it ends and the rest when the run ends. Short of space, tests fail with
# "No space left on device" wherever they happen to be; say so first.
scratch=${TMPDIR:-/tmp}
free_gib=$(df -P -k "$scratch" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
echo "free space in $scratch: $free_gib GiB (the run's scratch peaks near 14 GB)"
if ((free_gib < 20)); then
	echo "warning: less than 20 GiB free in $scratch; tests may fail for want of space" >&2
fi

PYTEST=(.venv/bin/python -m pytest)

crash=(tests/integration/crash tests/integration/testing tests/integration/cli
	tests/integration/demo tests/integration/runtime/test_cli_object_storage.py)
servers=(tests/integration/cluster tests/integration/connect/test_mirror.py)
runtime=(tests/integration/runtime)

ignore() { for p in "$@"; do printf -- '--ignore=%s\n' "$p"; done; }
mapfile -t runtime_ignores < <(ignore "${crash[@]}" "${servers[@]}")
mapfile -t rest_ignores < <(ignore "${crash[@]}" "${servers[@]}" "${runtime[@]}")

logs=$(mktemp -d)
declare -A names=()
pids=()
stop() {
	trap - INT TERM
	kill -- "${pids[@]}" 2>/dev/null
	wait
	rm -rf "$logs"
	exit 130
}
trap stop INT TERM

start() { # name, pytest arguments: one group in the background, its output to a log
	local name=$1
	shift
	"${PYTEST[@]}" -p no:cacheprovider --durations=15 "$@" >"$logs/$name" 2>&1 &
	pids+=($!)
	names[$!]=$name
}
start crash "${crash[@]}"
start servers "${servers[@]}"
start runtime "${runtime[@]}" "${runtime_ignores[@]}"

declare -A status=()
"${PYTEST[@]}" --durations=25 "${rest_ignores[@]}"
status[rest]=$?
running=("${pids[@]}")
while ((${#running[@]})); do
	wait -n -p done_pid "${running[@]}"
	rc=$?
	name=${names[$done_pid]}
	status[$name]=$rc
	echo "==== pytest group '$name' (ran beside the run above): exit status $rc ===="
	cat "$logs/$name"
	left=()
	for pid in "${running[@]}"; do [ "$pid" = "$done_pid" ] || left+=("$pid"); done
	running=("${left[@]}")
done
rm -rf "$logs"

summary=""
first=0
for name in rest runtime crash servers; do
	summary+=" $name ${status[$name]}"
	if [ "$first" = 0 ] && [ "${status[$name]}" != 0 ]; then first=${status[$name]}; fi
done
echo "==== exit status per group:$summary ===="
exit "$first"
