#!/usr/bin/env bash
# Checks that docs/architecture.md names every folder of lib/ and python/tenfold/ (as
# "lib/<name>/" or "python/tenfold/<name>/"), so that the page keeps describing the tree.
set -euo pipefail
root=$1
doc="$root/docs/architecture.md"
missing=()
for dir in "$root"/lib/*/ "$root"/python/tenfold/*/; do
  rel=${dir#"$root"/}
  case "$rel" in *__pycache__/) continue ;; esac
  grep -qF "$rel" "$doc" || missing+=("$rel")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "docs/architecture.md does not name: ${missing[*]}"
  exit 1
fi
echo "docs/architecture.md names every folder of lib/ and python/tenfold/"
