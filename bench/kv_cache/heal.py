"""Healing a compressed decoder by distillation (SmolLM2-135M-Instruct): compress_model at
a fraction of the KV cache, data-aware, then tenfold.torch.distill towards the original
(loss="kl", the keys' and values' parameters only) on the calibration text of
bench/kv_cache/run.py for a bounded CPU time, keeping the parameters of the best
perplexity on a validation part of the calibration text; perplexity on run.py's
held-out text before and after.

    python bench/kv_cache/heal.py --out DIR [--kv-cache 0.25] [--joint] [--quick]   # the environment of bench/rope

--joint converts with compress_model(joint=True) (one latent for keys and values) instead of
bands of 8.

Writes DIR/heal.json; docs/kv-cache.md gives the figures.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import time

import torch

import tenfold.torch as tt

# bench/kv_cache/run.py under a name of its own (it imports bench/rope/run.py as `run`)
_spec = importlib.util.spec_from_file_location("kv_cache_run", os.path.join(os.path.dirname(__file__), "run.py"))
kv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kv)
calibration, held_out, rope = kv.calibration, kv.held_out, kv.rope


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for heal.json (created)")
    ap.add_argument("--kv-cache", type=float, default=0.25, help="fraction of the KV cache kept")
    ap.add_argument("--joint", action="store_true", help="one latent for keys and values instead of bands of 8")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--quick", action="store_true", help="5 CPU minutes of distillation instead of 30, less text")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok, model = rope.load()
    sources = held_out(tok, 4096 if args.quick else 25600, 2048)
    batches = calibration(tok, 8192)
    train, validation = batches[:-2], batches[-2:]  # the last two docstring chunks choose the checkpoint
    student = copy.deepcopy(model)
    t = time.process_time()
    form = {"joint": True} if args.joint else {"bands": 8}
    tt.compress_model(student, kv_cache=args.kv_cache, calibration=batches, **form)
    conversion = time.process_time() - t

    def held(m):
        return {k: rope.perplexity(m, v) for k, v in sources.items()}

    original, start = held(model), held(student)
    print(f"original {original}\nconverted {start}", flush=True)
    evaluations = []
    cpu = 300.0 if args.quick else 1800.0
    t = time.process_time()
    losses = tt.distill(student, model, train, steps=100000, lr=args.lr, loss="kl", every=20, cpu_seconds=cpu,
                        evaluate=lambda m: rope.perplexity(m, [b["input_ids"] for b in validation]),
                        on_evaluate=lambda step, v: (evaluations.append((step, v)),
                                                     print(f"step {step} validation perplexity {v:.3f}", flush=True)))
    distill_cpu = time.process_time() - t
    end = held(student)
    print(f"healed {end}", flush=True)
    result = {"model": rope.GGUF, "kv_cache": args.kv_cache, **form, "lr": args.lr, "quick": args.quick,
              "conversion_cpu_s": conversion, "distill_cpu_s": distill_cpu, "steps": len(losses),
              "train_tokens": sum(b["input_ids"].shape[1] for b in train),
              "validation_tokens": sum(b["input_ids"].shape[1] for b in validation),
              "threads": torch.get_num_threads(), "load": os.getloadavg(), "original": original,
              "converted": start, "healed": end, "validation": evaluations, "losses": losses}
    with open(os.path.join(args.out, "heal.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
