#!/usr/bin/env bash
# Tools the test suite runs besides Python, Java and Apache Kafka: kcat (Debian package
# `kcat`), the third Kafka client of the broker tests (tests/integration/broker/test_kcat.py),
# and the headless browser of the pipeline page's test (tests/integration/ui/): Debian's
# `chromium` and its `chromium-driver` (/usr/bin/chromium, /usr/bin/chromedriver), and
# PostgreSQL 15 (Debian package `postgresql`, binaries in /usr/lib/postgresql/15/bin), the
# database the Debezium tests capture changes from (tests/support/postgres.py).
# Installs them with apt-get when running as root on Debian; otherwise says what to install
# and exits 1, because a test tool that is missing fails its tests (a skipped test would
# pass without running anything). `make test` runs this first.
set -uo pipefail

missing() {
  command -v kcat >/dev/null 2>&1 || echo kcat
  [ -x /usr/bin/chromium ] || echo chromium
  [ -x /usr/bin/chromedriver ] || echo chromium-driver
  [ -x /usr/lib/postgresql/15/bin/postgres ] || echo postgresql
}

apt_root() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}

need=$(missing | xargs)
[ -z "$need" ] && exit 0

if apt_root; then
  echo "installing $need with apt-get for the tests" >&2
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086  # one word per package
  { apt-get install -y -qq $need || { apt-get update -qq && apt-get install -y -qq $need; }; } >/dev/null 2>&1
  need=$(missing | xargs)
  [ -z "$need" ] && exit 0
fi

cat >&2 <<MSG
The tests need $need, which is not installed and could not be installed here.
Install it, then run the tests again:
  Debian/Ubuntu:  sudo apt-get install $need
  macOS:          brew install kcat (the browser test runs where Debian's chromium
                  and chromium-driver are, as /usr/bin/chromium and /usr/bin/chromedriver;
                  the Debezium tests where PostgreSQL 15 is, in /usr/lib/postgresql/15/bin)
MSG
exit 1
