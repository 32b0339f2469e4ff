"""Perplexity of KV-cache forms at a fraction of the cache, by calibration text, on three
held-out texts (SmolLM2-135M-Instruct, data-aware): bench/real_model's held-out prose
(1,345 tokens, 512-token windows) and the first 4,096 tokens of each source of
bench/kv_cache/run.py (2,048-token windows). No cache bytes and no speed (run.py).

    python bench/kv_cache/probe.py [--fraction 0.5] [--calibration prose mixed]
        [--forms kv_cache kv_joint separate separate_even joint] [--sizes 96+96 64+128 ...]
                                                            # the environment of bench/rope

Calibration "prose": bench/real_model's CC0 prose (3,702 tokens); "mixed": run.py's
calibration (that prose and 8,192 tokens of docstrings of other standard-library modules).
Forms: `kv_cache` (compress_model(kv_cache=f, bands=8)), `kv_joint` (compress_model(kv_cache=f,
joint=True): the library's joint latent, values weighted by o_proj), `separate` (low_rank.separate at
kv_cache's keys and values), `separate_even` (the same with keys and values halved
evenly), `joint` (low_rank.joint: one latent of 2 f G d values for keys and values).
`--key-weightings W ...` adds kv_joint rows with key_weighting=W (the default row: "auto",
and the weighting it chose). `--sizes K+V ...` adds compress_model(shared_dim=K, value_dim=V, bands=8) rows (K "full":
the exact keys; V "whole": the original values). `--reading-keys K ...` adds, for each K,
shared rotary keys of K values (bands = 1) alone, the same keys with values read from their
unrotated latent plus 2 f G d - K latent values (low_rank.reading_keys), and the library's
separate latent values of that size beside the same keys (compress_model(shared_dim=K,
value_dim=2 f G d - K)).
"""

import argparse
import copy
import importlib.util
import os
import time

import torch

import tenfold.torch as tt

_spec = importlib.util.spec_from_file_location("kv_cache_run", os.path.join(os.path.dirname(__file__), "run.py"))
kv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kv)
rope, low_rank = kv.rope, kv.low_rank


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fraction", type=float, default=0.5)
    ap.add_argument("--calibration", nargs="+", choices=["prose", "mixed"], default=["prose", "mixed"])
    forms = ["kv_cache", "kv_joint", "separate", "separate_even", "joint"]
    ap.add_argument("--forms", nargs="*", choices=forms, default=forms)
    ap.add_argument("--sizes", nargs="*", default=[], help="K+V: key and latent value sizes per layer")
    ap.add_argument("--key-weightings", nargs="*", default=[], metavar="W",
                    help="kv_joint rows with key_weighting W each ('none', 'auto' or a number) instead of the default")
    ap.add_argument("--reading-keys", nargs="*", type=int, default=[], metavar="K",
                    help="key values per layer of the bands = 1 keys the values also read")
    args = ap.parse_args()
    tok, model = rope.load()
    cfg = model.config
    per_head = cfg.num_key_value_heads * cfg.head_dim
    held = {"prose": rope.chunks(tok, "prose_heldout.txt", 512), **kv.held_out(tok, 4096, 2048)}
    texts = {"prose": [{"input_ids": c} for c in rope.chunks(tok, "prose_calibration.txt", 512)],
             "mixed": kv.calibration(tok, 8192)}
    keys, rest = tt.rotary.kv_cache_split({"kv_cache": args.fraction, "bands": 8}, None, per_head)
    total = keys + rest["value_dim"]

    def report(label, m, seconds):
        out = {k: rope.perplexity(m, v) for k, v in held.items()}
        print(f"{label:34s}" + "".join(f"  {k} {p:8.2f} ({100 * (p / base[k] - 1):+6.1f} %)" for k, p in out.items())
              + f"  conversion {seconds:.0f} CPU s", flush=True)

    base = {k: rope.perplexity(model, v) for k, v in held.items()}
    print("original" + "".join(f"  {k} {p:.2f}" for k, p in base.items()), flush=True)
    for name in args.calibration:
        calib = texts[name]
        for form in args.forms + [f"sizes {x}" for x in args.sizes] + [f"{how} {k}" for k in args.reading_keys
                                                                         for how in ("alone", "reading", "beside")] \
                + [f"weighting {w}" for w in args.key_weightings]:
            m = copy.deepcopy(model)
            t = time.process_time()
            if form.startswith("sizes "):
                k, v = form.split()[1].split("+")
                options = {} if v == "whole" else {"value_dim": v if v == "full" else int(v)}
                tt.compress_model(m, k if k == "full" else int(k), bands=8, calibration=calib, **options)
                label = f"keys {k} + values {v}"
            elif form.split()[0] in ("alone", "reading", "beside"):
                how, k = form.split()[0], int(form.split()[1])
                if how == "alone":
                    tt.compress_model(m, k, calibration=calib)
                    label = f"keys {k} (bands 1), values whole"
                elif how == "reading":
                    low_rank.reading_keys(m, k, total - k, calib)
                    label = f"keys {k} + values reading them + {total - k}"
                else:
                    tt.compress_model(m, k, value_dim=total - k, calibration=calib)
                    label = f"keys {k} + latent values {total - k}"
            elif form == "kv_cache":
                tt.compress_model(m, kv_cache=args.fraction, bands=8, calibration=calib)
                label = f"kv_cache={args.fraction} ({keys}+{rest['value_dim']})"
            elif form == "kv_joint" or form.startswith("weighting "):
                w = form.split()[1] if form != "kv_joint" else "auto"
                rows = tt.compress_model(m, kv_cache=args.fraction, joint=True, calibration=calib,
                                         key_weighting=w if w in ("auto", "none") else float(w))
                label = f"kv_cache={args.fraction}, joint ({total}), key_weighting {w} -> {rows[0]['key_weighting']}"
            elif form == "joint":
                low_rank.joint(m, total, calibration=calib)
                label = f"joint latent {total}"
            else:
                k = keys if form == "separate" else total // 2
                low_rank.separate(m, k, total - k, calibration=calib)
                label = f"whitened SVD {k}+{total - k}"
            report(f"{name}: {label}", m, time.process_time() - t)
            del m


if __name__ == "__main__":
    main()
