#!/usr/bin/env bash
# S3Proxy, the S3-API server the object-storage tests run against (tests/support/s3.py):
# a real S3 protocol server over a local folder (its `filesystem` backend, with conditional
# writes: docs/decisions/0034), one jar with its dependencies, resolved from Maven Central
# once into
#   ~/.cache/spark-warehouse/s3proxy/s3proxy-<version>-jar-with-dependencies.jar
# Later runs find it there and need no network.
#
# Needs Maven (`mvn`) and Java >= 17. `make install` runs it and goes on when it fails;
# the object-storage tests then fail and say what is missing.
set -euo pipefail

VERSION="${S3PROXY_VERSION:-4.1.0}"
CACHE="${S3PROXY_CACHE:-$HOME/.cache/spark-warehouse/s3proxy}"
JAR="$CACHE/s3proxy-$VERSION-jar-with-dependencies.jar"

if [ -s "$JAR" ] && python3 -m zipfile -t "$JAR" >/dev/null 2>&1; then
  exit 0
fi
command -v mvn >/dev/null || { echo "s3proxy: Maven (mvn) is needed to resolve org.gaul:s3proxy:$VERSION" >&2; exit 1; }
mkdir -p "$CACHE"
echo "resolving org.gaul:s3proxy:$VERSION (jar-with-dependencies) from Maven Central (once) ..." >&2
mvn -q -B dependency:copy \
  -Dartifact="org.gaul:s3proxy:$VERSION:jar:jar-with-dependencies" \
  -DoutputDirectory="$CACHE" -Dmdep.overWriteReleases=true >&2
[ -s "$JAR" ] || { echo "s3proxy: $JAR was not written" >&2; exit 1; }
echo "s3proxy: $JAR" >&2
