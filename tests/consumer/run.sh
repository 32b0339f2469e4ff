#!/usr/bin/env bash
# Installs the build in BUILD_DIR into a temporary prefix, then builds and runs a
# consumer project against it, once through CMake and once through pkg-config.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer"
# A build with MPI: tenfold::mpi from the same package, run on two processes (as root,
# Open MPI needs its explicit permission).
if grep -q '^TENFOLD_WITH_MPI:BOOL=ON' "$build_dir/CMakeCache.txt"; then
  LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 "$work/build/consumer_mpi"
fi
libdir=$(find "$work/prefix" -name tenfold.pc -printf '%h\n')
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs tenfold)
# The headers need C++20, which the consumer chooses (pkg-config does not impose it).
# shellcheck disable=SC2086
${CXX:-c++} -std=c++20 "$src_dir/consumer.cpp" -o "$work/consumer_pc" $flags
LD_LIBRARY_PATH="$(dirname "$libdir"):${LD_LIBRARY_PATH:-}" "$work/consumer_pc"
"$work/prefix/bin/tenfold" --version
