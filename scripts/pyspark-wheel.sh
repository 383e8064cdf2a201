#!/usr/bin/env bash
# A wheel of the pyspark constraints.txt pins, built once into the folder given
# (`make install`: ${XDG_CACHE_HOME:-~/.cache}/spark-warehouse/wheels), which `make install`
# then offers uv (`--find-links`); uv takes a wheel over a source distribution.
#
# pyspark is published as a source distribution only. Where the index answers without
# cache headers, uv builds it again at every install, into a new revision of its cache;
# each build's files are new, so the class archive local sessions start with, keyed by
# the jars' sizes and times, was made again too (docs/decisions/0077). From one wheel,
# uv unpacks once and links those same files into every virtualenv.
#
# Usage: scripts/pyspark-wheel.sh <python of the virtualenv> <folder>
set -euo pipefail

python=$1
version=$(sed -n 's/^pyspark==//p' constraints.txt)
[ -n "$version" ] || { echo "pyspark-wheel: no pyspark==<version> pin in constraints.txt" >&2; exit 1; }
wheels=$2

# A build killed halfway leaves its temporary folder.
find "$wheels" -maxdepth 1 -name '.build-*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
if ! compgen -G "$wheels/pyspark-$version-*.whl" >/dev/null; then
	mkdir -p "$wheels"
	build=$(mktemp -d "$wheels/.build-XXXXXX")
	trap 'rm -rf "$build"' EXIT
	echo "building a wheel of pyspark $version from its source distribution (once, about a minute) ..." >&2
	"$python" -m pip wheel -q --no-deps -w "$build" "pyspark==$version" >&2
	# Renamed into place whole: a wheel in the folder is a finished one.
	mv "$build"/pyspark-"$version"-*.whl "$wheels"/
fi
