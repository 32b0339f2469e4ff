#!/usr/bin/env bash
# Reproduces the data-aware tables of docs/real-model.md: sets up .venv-real, builds the
# tenfold program in BUILD_DIR (default /tmp/build-real-model), runs calibration_eval.py
# four times (dampings; damping x token/sentence weights; calibration sizes and
# sequential calibration; other ranks) on one thread and draws
# docs/real-model-calibration.png. Results go to
# out/real_model/calibration/{dampings,weights,sizes,ranks}/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=$(bash "$here/setup_env.sh" | tail -n 1)
tenfold=$(bash "$here/build_cli.sh")
out=$root/out/real_model/calibration
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
run() { "$venv/bin/python" "$here/calibration_eval.py" --tenfold "$tenfold" "$@"; }
run --out "$out/dampings" --dampings 0.001 0.01 0.1
run --out "$out/weights" --dampings 0.1 0.3 1 --weightings token sentence --no-weight-only
run --out "$out/sizes" --sizes 16 64 256 --dampings 0.3 --sequential
run --out "$out/ranks" --ranks 288 96 64 --dampings 0.3
"$venv/bin/python" "$here/plot_calibration.py" "$root/docs/real-model-calibration.png" \
  "$out/dampings/calibration.json" "$out/weights/calibration.json"
