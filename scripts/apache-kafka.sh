#!/usr/bin/env bash
# Apache Kafka, the reference broker of the conformance tests (tests/integration/oracle):
# resolves the newest Apache Kafka 4.x server and tools jars with their dependencies
# from Maven Central once, into
#   ~/.cache/spark-warehouse/apache-kafka/<version>/lib/*.jar
#   ~/.cache/spark-warehouse/apache-kafka/<version>/classpath   (the jars, one a line)
#   ~/.cache/spark-warehouse/apache-kafka/current               (the version to use)
# Later runs find them there and need no network.
#
#   scripts/apache-kafka.sh            nothing to do when a version is cached, else the newest 4.x
#   scripts/apache-kafka.sh --upgrade  the newest 4.x, even when another version is cached
#   scripts/apache-kafka.sh 4.1.0      exactly that version
#
# Needs Maven (`mvn`) and Java >= 17. `make install` runs it and goes on when it fails;
# the oracle tests then fail and say what is missing.
set -euo pipefail

CACHE="${APACHE_KAFKA_CACHE:-$HOME/.cache/spark-warehouse/apache-kafka}"
GROUP=org.apache.kafka
RANGE='[4.0.0,5.0.0)'
# kafka.Kafka and kafka.tools.StorageTool live in the Scala core; kafka-server and
# kafka-tools complete what the distribution's libs/ holds. slf4j-simple gives the
# server's slf4j 1.x logging a sink (stderr, level set by the launcher).
ARTIFACTS=(kafka_2.13 kafka-server kafka-tools)
SLF4J_SIMPLE=org.slf4j:slf4j-simple:1.7.36

die() { echo "apache-kafka: $*" >&2; exit 1; }

complete() {  # complete <version>: its class path file is there and names only existing jars
  [ -n "$1" ] && [ -s "$CACHE/$1/classpath" ] || return 1
  while IFS= read -r jar; do [ -f "$jar" ] || return 1; done <"$CACHE/$1/classpath"
}

cached_version() {
  local v
  [ -f "$CACHE/current" ] || return 1
  v=$(cat "$CACHE/current")
  complete "$v" || return 1
  echo "$v"
}

pom() {  # pom <version-or-range> <dependency lines...>
  local version=$1
  shift
  echo '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
  echo '<groupId>local.oracle</groupId><artifactId>apache-kafka</artifactId><version>0</version>'
  echo '<dependencies>'
  for a in "$@"; do
    echo "<dependency><groupId>$GROUP</groupId><artifactId>$a</artifactId><version>$version</version></dependency>"
  done
  IFS=: read -r g a v <<<"$SLF4J_SIMPLE"
  echo "<dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>"
  echo '</dependencies></project>'
}

upgrade=0
want=""
case "${1:-}" in
  "") ;;
  --upgrade) upgrade=1 ;;
  -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
  [0-9]*) want=$1 ;;
  *) die "unknown argument \`$1\`: expected nothing, --upgrade or a version such as 4.1.0" ;;
esac

if [ -z "$want" ] && [ "$upgrade" = 0 ] && v=$(cached_version); then
  echo "Apache Kafka $v: cached in $CACHE/$v"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || die "Maven (\`mvn\`) is not on PATH: install it (Debian: apt-get install maven) and run $0 again"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
MVN=(mvn -B -q -ntp -f "$work/pom.xml")

if [ -z "$want" ]; then
  # Maven's own version-range resolution picks the newest release in the range.
  pom "$RANGE" kafka_2.13 >"$work/pom.xml"
  "${MVN[@]}" dependency:list -DexcludeTransitive=true -DincludeArtifactIds=kafka_2.13 \
    -DoutputFile="$work/list.txt" >"$work/mvn.log" 2>&1 \
    || { cat "$work/mvn.log" >&2; die "could not resolve $GROUP:kafka_2.13:$RANGE from Maven Central"; }
  want=$(sed -n "s/.*$GROUP:kafka_2.13:jar:\([^:]*\):.*/\1/p" "$work/list.txt" | head -n1)
  [ -n "$want" ] || die "no version of $GROUP:kafka_2.13 in $RANGE in Maven's answer: $(cat "$work/list.txt")"
fi

dest="$CACHE/$want"
if complete "$want"; then
  echo "$want" >"$CACHE/current"
  echo "Apache Kafka $want: cached in $dest"
  exit 0
fi
rm -rf "$dest.partial"
mkdir -p "$dest.partial/lib"
pom "$want" "${ARTIFACTS[@]}" >"$work/pom.xml"
"${MVN[@]}" dependency:copy-dependencies -DincludeScope=runtime \
  -DoutputDirectory="$dest.partial/lib" >"$work/mvn.log" 2>&1 \
  || { cat "$work/mvn.log" >&2; rm -rf "$dest.partial"; die "could not resolve Apache Kafka $want (${ARTIFACTS[*]}) from Maven Central"; }
rm -rf "$dest"
mv "$dest.partial" "$dest"
# The class path file is written last: its presence marks a complete download.
find "$dest/lib" -name '*.jar' | sort >"$dest/classpath.tmp"
mv "$dest/classpath.tmp" "$dest/classpath"
echo "$want" >"$CACHE/current.tmp"
mv "$CACHE/current.tmp" "$CACHE/current"
echo "Apache Kafka $want: $(wc -l <"$dest/classpath") jars in $dest"
