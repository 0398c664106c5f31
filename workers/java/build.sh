#!/bin/sh
# Compiles the Java reference worker into workers/java/build (for `java -cp workers/java/build
# leasehold.Conformance`); `java workers/java/Worker.java --conformance` needs no build at all.
set -e
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$here/build"
javac --release 17 -d "$here/build" "$here/Worker.java"
