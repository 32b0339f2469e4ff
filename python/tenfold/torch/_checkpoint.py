"""Reading the safetensors checkpoints both conversions load (collaborative and rotary)."""

from __future__ import annotations

import json
import os


def read_checkpoint(path) -> tuple:
    """All tensors (torch, on the CPU) and the metadata of a safetensors file, or of the
    shards listed by a model.safetensors.index.json."""
    from safetensors import safe_open

    path = os.fspath(path)
    if os.path.isdir(path):
        single = os.path.join(path, "model.safetensors")
        index = single + ".index.json"
        files = [single] if os.path.exists(single) else (
            sorted({os.path.join(path, v) for v in json.load(open(index))["weight_map"].values()})
            if os.path.exists(index) else [])
        if not files:
            raise FileNotFoundError(f"'{path}' holds no model.safetensors (or its index)")
    else:
        files = [path]
    tensors, meta = {}, {}
    for file in files:
        with safe_open(file, framework="pt") as s:
            meta.update(s.metadata() or {})
            for k in s.keys():
                tensors[k] = s.get_tensor(k)
    return tensors, meta
