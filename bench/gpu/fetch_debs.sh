#!/usr/bin/env bash
# Downloads, without installing, the Debian packages that bench/gpu/run.sh needs on
# a device machine that lacks them and has no network: OpenBLAS (OpenMP build) with
# LAPACKE, nlohmann-json, CLI11, GoogleTest and Google Benchmark, plus the shared
# libraries they load that a machine with a C++ compiler may not have. Run it on a
# machine that reaches Debian's archive; the .deb files (about 14 MB, amd64) land in
# .deps/ at the repository root, which git ignores. Then, on the device machine,
# with .deps carried along: bash bench/gpu/run.sh (see docs/gpu.md).
#
# Left out on purpose (checked with apt-cache depends):
# - libblas3, liblapack3: the reference libraries; OpenBLAS ships its own
#   libblas.so.3 and liblapack.so.3, which liblapacke then loads.
# - libc6, libgcc-s1, libstdc++6, libgomp1, gcc-12-base: they come with the
#   compiler, and an older copy first on the library path would shadow them.
# - googletest: GoogleTest's sources, not needed to link against libgtest.a.
set -euo pipefail
cd "$(dirname "$0")/../.."

packages=(
  libopenblas0-openmp libopenblas-openmp-dev # BLAS and LAPACK, OpenMP threads
  liblapacke liblapacke-dev libtmglib3       # LAPACKE (liblapacke loads libtmglib)
  libgfortran5 libquadmath0                  # loaded by OpenBLAS
  nlohmann-json3-dev libcli11-dev            # header-only
  libgtest-dev libgmock-dev                  # GTest's CMake package includes GMock's targets
  libbenchmark-dev libbenchmark1debian
)

# apt-get download needs the package lists.
if ! apt-cache show "${packages[0]}" >/dev/null 2>&1; then
  apt-get update
fi

mkdir -p .deps
rm -f .deps/*.deb
(cd .deps && apt-get -o APT::Sandbox::User=root download "${packages[@]}")
echo "fetch_debs: $(ls .deps/*.deb | wc -l) packages, $(du -sh .deps | cut -f1) in .deps/"
