#!/usr/bin/env bash
# Configures and builds the add_subdirectory consumer against this source tree, then runs it.
set -euo pipefail
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -S "$src_dir" -B "$work" -DTENFOLD_SOURCE_DIR="$(cd "$src_dir/../.." && pwd)" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work" -j "$(nproc)" --target consumer >/dev/null
"$work/consumer"
