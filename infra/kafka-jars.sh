#!/usr/bin/env bash
# Regenerates src/memstream/stackfiles/kafka-jars.txt, the jars `memstream up` downloads,
# from infra/pom.xml: run it (it needs Maven) after changing the pom's versions.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mvn -q -B -f infra/pom.xml -Dmaven.repo.local="$work/m2" \
  dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$work/libs"
list=src/memstream/stackfiles/kafka-jars.txt
{
  sed -n '1,2p' "$list"
  for jar in "$work"/libs/*.jar; do
    path=$(cd "$work/m2" && find . -name "$(basename "$jar")" | head -1 | sed 's|^\./||')
    echo "$path $(sha256sum "$jar" | cut -c1-64)"
  done
} > "$list.new"
mv "$list.new" "$list"
