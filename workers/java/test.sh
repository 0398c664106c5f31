#!/bin/sh
# Compiles the Java worker and its tests (src/main/java, src/test/java) into a temporary
# directory and runs them (exit 0 = all passed).
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
javac --release 17 -d "$out" $(find "$here/src/main/java" "$here/src/test/java" -name '*.java')
java -cp "$out" leasehold.WorkerTest
