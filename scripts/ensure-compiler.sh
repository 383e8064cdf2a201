#!/usr/bin/env bash
# The install compiles two optional C extensions (setup.py): the Kafka source's column
# reader and the landing path's flat JSON parser. They need a C compiler and the headers
# of the Python the venv is made from. Installs Debian's gcc (and python3.X-dev for a
# Debian-packaged Python) when running as root, otherwise says what is missing; without
# them the install goes on and the framework runs on the Python code instead.
# Usage: scripts/ensure-compiler.sh PYTHON
set -euo pipefail

python=${1:-python3}

has_cc() {
  command -v "${CC:-cc}" >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1
}

headers() {  # the include directory of $python, or nothing when Python.h is not in it
  "$python" -c 'import os, sysconfig; d = sysconfig.get_paths()["include"]; print(d if os.path.exists(os.path.join(d, "Python.h")) else "")'
}

dev_package() {  # Debian's headers package for $python, when Debian installed it
  "$python" -c 'import sys; p = sys.base_prefix; v = sys.version_info; print(f"python{v.major}.{v.minor}-dev" if p == "/usr" else "")'
}

apt_root() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}

missing=()
has_cc || missing+=(gcc)
if [ -z "$(headers)" ]; then
  pkg=$(dev_package)
  missing+=("${pkg:-the headers (Python.h) of $python}")
fi
[ ${#missing[@]} = 0 ] && exit 0

if apt_root; then
  echo "installing ${missing[*]} with apt-get (to compile the optional C extensions)" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq "${missing[@]}" \
    || { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; }; } >/dev/null \
    && exit 0
  echo "could not install ${missing[*]}" >&2
fi
cat >&2 <<MSG
The C extensions will not be built (missing: ${missing[*]}); the framework runs on its
Python code instead, slower (docs/benchmarks.md). To build them, install the missing
packages (Debian/Ubuntu: sudo apt-get install ${missing[*]}), then
\`rm .venv/.installed && make install\`.
MSG
exit 0
