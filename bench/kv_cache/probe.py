"""A first probe of latent values: SmolLM2-135M-Instruct perplexity on bench/real_model's
held-out prose (1,345 tokens, 512-token windows) with shared rotary keys alone and with
latent values too, data-aware on 16 windows of the calibration prose. Not the KV-cache
benchmark (no cache bytes, no decode speed, a short held-out text): docs/kv-cache.md.

    python bench/kv_cache/probe.py        # the environment of bench/rope (requirements.txt)
"""
import copy
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rope"))

import run as rope  # noqa: E402

import tenfold.torch as tt  # noqa: E402

tok, model = rope.load()
held = rope.chunks(tok, "prose_heldout.txt", 512)
calib = rope.chunks(tok, "prose_calibration.txt", 512)[:16]
print("held-out tokens", sum(c.shape[1] for c in held), "calibration", sum(c.shape[1] for c in calib))
base = rope.perplexity(model, held)
print(f"original ppl {base:.3f}")
batches = [{"input_ids": c} for c in calib]
for label, kw in [("keys 96 (bands 8), values whole", dict(shared_dim=96, bands=8)),
                  ("keys 96 (bands 8) + values 96", dict(shared_dim=96, bands=8, value_dim=96)),
                  ("keys whole (full) + values 96", dict(shared_dim="full", bands=8, value_dim=96)),
                  ("keys 144 (bands 8) + values 144", dict(shared_dim=144, bands=8, value_dim=144)),
                  ("keys 64 (bands 8) + values 128", dict(shared_dim=64, bands=8, value_dim=128)),
                  ("keys 128 (bands 8) + values 64", dict(shared_dim=128, bands=8, value_dim=64)),
                  ("keys 48 (bands 8) + values 48", dict(shared_dim=48, bands=8, value_dim=48))]:
    m = copy.deepcopy(model)
    t = time.perf_counter()
    rep = tt.compress_model(m, calibration=batches, **kw)
    secs = time.perf_counter() - t
    ppl = rope.perplexity(m, held)
    errors = [r["value_data_error"] for r in rep if r.get("value_data_error") is not None]
    mean = sum(errors) / len(errors) if errors else float("nan")
    print(f"{label:36s} ppl {ppl:.3f} ({100 * (ppl / base - 1):+.1f} %), convert {secs:.1f} s, "
          f"mean value data error {mean:.4f}")
