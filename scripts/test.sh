#!/usr/bin/env bash
# Installs the dependencies, builds Tenfold with its tests, and runs the whole suite
# (C++ suites, the CLI tests, and the NumPy-only Python tests in a virtual environment).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
# A virtual environment with NumPy for the Python tests that drive the tenfold program.
venv="$root/.venv-test"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import numpy" 2>/dev/null || "$venv/bin/pip" install -q "numpy==2.4.6"
"$root/scripts/build.sh" -DTENFOLD_TEST_PYTHON="$venv/bin/python"
ctest --test-dir "$root/build" --output-on-failure -j "$(nproc)"
