#!/usr/bin/env bash
# Builds GenTen (Sandia) on Kokkos's OpenMP backend, for side-by-side CP-ALS timings:
#   bash bench/peers/build_genten.sh GENTEN_SRC [BUILD_DIR]
# GENTEN_SRC is a GenTen source tree fetched beforehand (this script downloads nothing):
# a git checkout, or an exported tree with its commit in GENTEN_SRC/.commit. Kokkos and
# Kokkos Kernels are the copies GenTen bundles in tpls/ (built inline, the versions
# GenTen is tested with). BUILD_DIR (default build/peers/genten-<float type>) receives
# the build and versions.txt (commits, versions, compiler and flags). LAPACK/BLAS is the
# system OpenBLAS that Tenfold links, so that both sides run the same GEMM kernels.
# Environment: FLOAT_TYPE (double, default, or float), JOBS (default 2), NICE (default 5).
# Only the driver program (bin/genten) is built; GCP, tests and examples are left out.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 GENTEN_SRC [BUILD_DIR]" >&2
  exit 2
fi
genten_src=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
float_type=${FLOAT_TYPE:-double}
out=${2:-$root/build/peers/genten-$float_type}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-2}
lapack=${LAPACK_LIBS:-$(ls /usr/lib/*-linux-gnu/libopenblas.so 2>/dev/null | head -n 1)}
if [ -z "$lapack" ]; then
  echo "$0: no OpenBLAS found; set LAPACK_LIBS to a LAPACK library" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# Kokkos: OpenMP (and Serial) for the host architecture (-march=native through
# Kokkos_ARCH_NATIVE); GenTen: Release, the chosen float type, no GCP/Python/MPI.
# With ENABLE_GCP=OFF, GenTen's CP-OPT L-BFGS-B code (built for float64) still refers to
# the GCP value kernels of the Gaussian and Poisson losses, which are then not compiled,
# so the driver does not link (GenTen 0cd9151: gcp_value<Space, PoissonLossFunction> is
# missing). Those two symbols are defined as address 0 at link time: the driver runs
# every method but CP-OPT with L-BFGS-B and a Poisson loss, which would crash.
# (ENABLE_GCP=ON -DGCP_LOSS_TYPES="Gaussian;Poisson" builds everything, at the cost of a
# dozen more heavy translation units.)
missing=""
for space in OpenMP Serial; do
  missing+=" -Wl,--defsym=_ZN6Genten4Impl9gcp_valueIN6Kokkos${#space}${space}ENS_19PoissonLossFunctionEEEdRKNS_7TensorTIT_EERKNS_8KtensorTIS6_EEdRKT0_=0"
done
flags=(-DCMAKE_BUILD_TYPE=Release -DFLOAT_TYPE="$float_type"
  -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_NATIVE=ON
  -DKokkos_ENABLE_TESTS=OFF -DKokkos_ENABLE_EXAMPLES=OFF -DKokkosKernels_ENABLE_TESTS=OFF
  -DLAPACK_LIBS="$lapack" -DLAPACK_ADD_LIBS="-lpthread;-lm;-ldl" -DENABLE_GCP=OFF
  -DENABLE_PYTHON=OFF -DENABLE_MPI=OFF -DBUILD_TESTING=OFF
  -DCMAKE_EXE_LINKER_FLAGS="${missing# }")
nice -n "${NICE:-5}" cmake -S "$genten_src" -B "$out" "${flags[@]}" "${launcher[@]}"
nice -n "${NICE:-5}" cmake --build "$out" --target genten -j "$jobs"

commit() {
  if git -C "$1" rev-parse HEAD >/dev/null 2>&1; then
    git -C "$1" rev-parse HEAD
  elif [ -f "$1/.commit" ]; then
    cat "$1/.commit"
  else
    echo "unknown commit"
  fi
}
version() { grep -m 1 -o "${2}_VERSION_${3} [0-9]*" "$1/CMakeLists.txt" | awk '{print $2}'; }
kk=$genten_src/tpls/kokkos
kkk=$genten_src/tpls/kokkos-kernels
{
  echo "genten $(commit "$genten_src") ($genten_src)"
  echo "kokkos (bundled in GenTen tpls/kokkos)" \
    "$(version "$kk" Kokkos MAJOR).$(version "$kk" Kokkos MINOR).$(version "$kk" Kokkos PATCH)"
  echo "kokkos-kernels (bundled in GenTen tpls/kokkos-kernels)" \
    "$(version "$kkk" KokkosKernels MAJOR).$(version "$kkk" KokkosKernels MINOR).$(version "$kkk" KokkosKernels PATCH)"
  echo "compiler $(${CXX:-c++} --version | head -n 1)"
  echo "lapack $lapack ($(dpkg -S "$(readlink -f "$lapack")" 2>/dev/null | cut -d: -f1)" \
    "$(dpkg-query -W -f='${Version}' libopenblas0-openmp 2>/dev/null || true))"
  echo "flags ${flags[*]}"
} > "$out/versions.txt"
echo "GenTen built in $out (driver: $out/bin/genten); versions in $out/versions.txt"
