#!/usr/bin/env bash
# Optional tools some tests use as a third Kafka client (kcat, Debian package `kcat`).
# Installed when running as root on Debian; otherwise those tests skip with a reason.
set -u
command -v kcat >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing kcat (Debian) for the broker conformance tests" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq kcat || { apt-get update -qq && apt-get install -y -qq kcat; }; } >/dev/null 2>&1 \
    || echo "kcat could not be installed; its tests will skip" >&2
fi
exit 0
