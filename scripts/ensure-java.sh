#!/usr/bin/env bash
# Spark 4 needs a JDK/JRE >= 17 on PATH (or JAVA_HOME). Installs Debian's
# openjdk-17-jdk-headless when running as root, otherwise says what to install.
# `javac` is optional: `warehouse jars fetch` compiles the framework's local file
# system with it (warehouse/runtime/local_fs.py); without it, local sessions keep
# Hadoop's, which starts a `chmod` process for every file it creates.
set -euo pipefail

java_major() {
  local java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  command -v "$java" >/dev/null 2>&1 || { echo 0; return; }
  # `java -version` prints e.g.: openjdk version "17.0.15" 2025-04-15  (or "1.8.0_402")
  local v
  v=$("$java" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
  v=${v#1.}
  echo "${v%%[.+-]*}"
}

has_javac() {
  command -v "${JAVA_HOME:+$JAVA_HOME/bin/}javac" >/dev/null 2>&1 || command -v javac >/dev/null 2>&1
}

apt_root() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}

major=$(java_major)
if [ "${major:-0}" -ge 17 ] 2>/dev/null; then
  if ! has_javac && apt_root; then
    echo "no javac (a JDK); installing openjdk-17-jdk-headless with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -qq openjdk-17-jdk-headless \
      || { apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless; }; } >/dev/null \
      || echo "could not install openjdk-17-jdk-headless: local sessions keep Hadoop's local file system" >&2
  fi
  exit 0
fi

if apt_root; then
  echo "Java >= 17 not found (found: ${major:-none}); installing openjdk-17-jdk-headless with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
  major=$(java_major)
  [ "${major:-0}" -ge 17 ] && exit 0
fi

cat >&2 <<MSG
Spark needs Java 17 or newer, and none was found (java on PATH: ${major:-none}).
Install it, then run the command again:
  Debian/Ubuntu:  sudo apt-get install openjdk-17-jdk-headless
  macOS:          brew install openjdk@17
or point JAVA_HOME at an existing JDK >= 17.
MSG
exit 1
