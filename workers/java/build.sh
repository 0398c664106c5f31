#!/bin/sh
# Builds the Java reference worker (package leasehold, src/main/java) into
# workers/java/build/leasehold-worker.jar (Java 17, no dependencies). Put it on the class path
# of your own worker:
#   java -cp workers/java/build/leasehold-worker.jar Resize.java
# or run its conformance task set:
#   java -cp workers/java/build/leasehold-worker.jar leasehold.Conformance
set -e
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$here/build"
javac --release 17 -d "$here/build/classes" $(find "$here/src/main/java" -name '*.java')
jar --create --file "$here/build/leasehold-worker.jar" -C "$here/build/classes" .
