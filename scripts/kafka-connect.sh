#!/usr/bin/env bash
# Kafka Connect and Debezium's Postgres connector, for the Connect and CDC tests
# (tests/support/kafka_connect.py): resolves from Maven Central once, into
#   ~/.cache/spark-warehouse/kafka-connect/<version>/lib/*.jar    the worker: connect-runtime,
#                                                                  connect-file, connect-json,
#                                                                  connect-mirror (MirrorMaker 2,
#                                                                  for `warehouse mirror`)
#   ~/.cache/spark-warehouse/kafka-connect/<version>/classpath    (the worker's jars, one a line)
#   ~/.cache/spark-warehouse/kafka-connect/<version>/plugins/debezium-connector-postgres/*.jar
#                                                                  a plugin folder (plugin.path)
# Later runs find them there and need no network.
#
# Connect is pinned to the 4.1 line: Debezium 3.6 calls org.apache.kafka.common.utils.Sanitizer,
# which the 4.4 line no longer has. The plugin folder holds Debezium with its dependencies
# less what the worker itself provides (Kafka's own jars and slf4j, which Connect's plugin
# class loader takes from the worker anyway).
#
# Needs Maven (`mvn`) and Java >= 17. `make install` runs it and goes on when it fails;
# the Connect and CDC tests then fail and say what is missing.
set -euo pipefail

VERSION="${KAFKA_CONNECT_VERSION:-4.1.1}"
DEBEZIUM="${DEBEZIUM_VERSION:-3.6.1.Final}"
CACHE="${KAFKA_CONNECT_CACHE:-$HOME/.cache/spark-warehouse/kafka-connect}"
DEST="$CACHE/$VERSION"
PLUGIN=debezium-connector-postgres
# slf4j-simple gives the worker's slf4j 1.x logging a sink (stderr, level set by the launcher).
WORKER=(org.apache.kafka:connect-runtime:$VERSION org.apache.kafka:connect-file:$VERSION
  org.apache.kafka:connect-json:$VERSION org.apache.kafka:connect-mirror:$VERSION
  org.apache.kafka:connect-mirror-client:$VERSION org.slf4j:slf4j-simple:1.7.36)

die() { echo "kafka-connect: $*" >&2; exit 1; }

complete() {  # the class path file is there, names only existing jars (MirrorMaker's among
  # them: caches made before it was added are resolved again), and the plugin has jars
  [ -s "$DEST/classpath" ] || return 1
  grep -q "/connect-mirror-$VERSION.jar\$" "$DEST/classpath" || return 1
  while IFS= read -r jar; do [ -f "$jar" ] || return 1; done <"$DEST/classpath"
  compgen -G "$DEST/plugins/$PLUGIN/*.jar" >/dev/null
}

pom() {  # pom <group:artifact:version...>
  echo '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
  echo '<groupId>local.tests</groupId><artifactId>kafka-connect</artifactId><version>0</version>'
  echo '<dependencies>'
  for coordinate in "$@"; do
    IFS=: read -r g a v <<<"$coordinate"
    echo "<dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>"
  done
  echo '</dependencies></project>'
}

if complete; then
  echo "Kafka Connect $VERSION with Debezium $DEBEZIUM: cached in $DEST"
  exit 0
fi
command -v mvn >/dev/null 2>&1 || die "Maven (\`mvn\`) is not on PATH: install it (Debian: apt-get install maven) and run $0 again"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "resolving Kafka Connect $VERSION and Debezium $DEBEZIUM from Maven Central (once) ..." >&2
rm -rf "$DEST.partial"
mkdir -p "$DEST.partial/lib" "$DEST.partial/plugins/$PLUGIN" "$work/worker" "$work/plugin"

pom "${WORKER[@]}" >"$work/worker/pom.xml"
mvn -B -q -ntp -f "$work/worker/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
  -DoutputDirectory="$DEST.partial/lib" >"$work/worker.log" 2>&1 \
  || { cat "$work/worker.log" >&2; rm -rf "$DEST.partial"; die "could not resolve ${WORKER[*]} from Maven Central"; }

pom "io.debezium:$PLUGIN:$DEBEZIUM" >"$work/plugin/pom.xml"
mvn -B -q -ntp -f "$work/plugin/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
  -DexcludeGroupIds=org.apache.kafka,org.slf4j \
  -DoutputDirectory="$DEST.partial/plugins/$PLUGIN" >"$work/plugin.log" 2>&1 \
  || { cat "$work/plugin.log" >&2; rm -rf "$DEST.partial"; die "could not resolve io.debezium:$PLUGIN:$DEBEZIUM from Maven Central"; }

rm -rf "$DEST"
mv "$DEST.partial" "$DEST"
# The class path file is written last: its presence marks a complete download.
find "$DEST/lib" -name '*.jar' | sort >"$DEST/classpath.tmp"
mv "$DEST/classpath.tmp" "$DEST/classpath"
echo "Kafka Connect $VERSION: $(wc -l <"$DEST/classpath") jars; Debezium $DEBEZIUM:" \
  "$(find "$DEST/plugins/$PLUGIN" -name '*.jar' | wc -l) jars; in $DEST"
