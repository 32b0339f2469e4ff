#!/usr/bin/env bash
# The KV-cache speed table (docs/kv-cache.md) on a machine with an NVIDIA GPU and no
# network: builds the Python package there, then times prefill and decode of the original
# decoder against kv_cache=0.5 (bands of 8, and the joint latent) on the GPU, float32 and
# bfloat16, at 2,048, 8,192 and 32,768 cached tokens, medians of 3 (bench/kv_cache/run.py --speed-only
# --device cuda --random-weights: SmolLM2-135M's shape with random weights, since the model
# file cannot travel; the work per token is the real model's). Results under $OUT
# (default runs/gpu-kv): speed[_joint]_cuda_<dtype>.json and kv.log.
#
# The machine needs PyTorch with CUDA, transformers, numpy, nanobind and scikit-build-core,
# CMake, a C++20 compiler, OpenBLAS and LAPACKE. Wheels of other versions (transformers of
# python/requirements-torch.txt, the build backend's pins of pyproject.toml) are taken from
# .whl/ when it was carried along:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl \
#     transformers==5.24.0 scikit-build-core==0.11.6 nanobind==2.9.2
set -uo pipefail
cd "$(dirname "$0")/../.."

out=${OUT:-runs/gpu-kv}
mkdir -p "$out"
py=${PYTHON:-python3}
site=${TENFOLD_SITE:-/tmp/tenfold-site}
rm -rf "$site"
log() { tee -a "$out/kv.log"; }

if compgen -G ".whl/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --target "$site/deps" .whl/*.whl 2>&1 | log
  export PYTHONPATH=$site/deps${PYTHONPATH:+:$PYTHONPATH}
fi
start=$SECONDS
# The package as `pip install .` builds it, without the network (the build backend from
# this environment) and into a private folder.
CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-16} "$py" -m pip install -q --no-index --no-deps --no-build-isolation \
  --target "$site/pkg" . 2>&1 | log || exit 1
export PYTHONPATH=$site/pkg:$PYTHONPATH
echo "built the Python package in $((SECONDS - start)) s" | log
"$py" -c "import torch, transformers, tenfold.torch; print('torch', torch.__version__, 'transformers',
transformers.__version__, torch.cuda.get_device_name(0))" 2>&1 | log || exit 1

status=0
for dtype in float32 bfloat16; do
  for form in "" --joint; do
    PYTHONUNBUFFERED=1 "$py" bench/kv_cache/run.py --out "$out" --speed-only --quick --device cuda --random-weights \
      --dtype "$dtype" $form --lengths 2048 8192 32768 2>&1 | log || status=1
  done
done
exit $status
