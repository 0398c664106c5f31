#!/bin/sh
# Compiles the Java worker and its tests into a temporary directory and runs them (exit 0 = all passed).
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
javac --release 17 -d "$out" "$here/Worker.java" "$here/WorkerTest.java"
java -cp "$out" leasehold.WorkerTest
