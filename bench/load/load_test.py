"""Times `tenfold` commands on a quiet and on a busy machine, default environment
against explicit OpenMP settings (the busy-machine load test of docs/performance.md).

For each command and each count of competing CPU-bound processes (busy loops started
before and stopped after the timing), every setting runs `--reps` times, interleaved;
the median wall time is reported. "default" removes every OMP_*, GOMP_* and
OPENBLAS_*_THREADS variable from the environment, as on a user's machine; the
explicit settings add one. The ratio is default over the best explicit setting.

    python3 bench/load/load_test.py [--tenfold build/tools/tenfold] [--competitors 0,1,2]
        [--reps 3] [--minilm model.safetensors] [--quick] [--json out.json]

Needs NumPy (the test virtual environment has it). Data is generated into --work.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
SETTINGS = {
    "default": {},
    "OMP_WAIT_POLICY=passive": {"OMP_WAIT_POLICY": "passive"},
    "OMP_NUM_THREADS=1": {"OMP_NUM_THREADS": "1"},
}


def clean_environment(extra):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("OMP_") or k.startswith("GOMP_") or k.startswith("KMP_")
                   or k in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS"))}
    env.update(extra)
    return env


def low_rank(shape, rank, seed, noise=0.1):
    """A rank-`rank` tensor with Gaussian factors plus `noise` relative Gaussian noise."""
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((n, rank)) for n in shape]
    x = factors[0]
    for f in factors[1:]:
        x = np.einsum("...r,jr->...jr", x, f)
    x = x.sum(axis=-1)
    x += noise * np.linalg.norm(x) / np.sqrt(x.size) * rng.standard_normal(shape)
    return x


def make_cases(work, args):
    cases = []
    def npy(name, shape, rank):
        path = work / name
        if not path.exists():
            np.save(path, low_rank(shape, rank, seed=len(shape) + rank))
        return str(path)
    out = str(work / "out")
    cases.append(("cp 200^3 R64, 10 sweeps",
                  ["cp", npy("cp200.npy", (200, 200, 200), 64), "--rank", "64", "--max-iters",
                   "10", "--tol", "0", "--quiet", "--out", out]))
    cases.append(("cp 50^4 R10, 50 sweeps",
                  ["cp", npy("cp50x4.npy", (50, 50, 50, 50), 10), "--rank", "10", "--max-iters",
                   "50", "--tol", "0", "--quiet", "--out", out]))
    if not args.quick:
        cases.append(("tucker 300^3 ranks 30 (ST-HOSVD)",
                      ["tucker", npy("tk300.npy", (300, 300, 300), 30), "--ranks", "30", "30",
                       "30", "--quiet", "--out", out]))
        bert = work / "bert12.safetensors"
        if not bert.exists():
            subprocess.run([sys.executable, str(ROOT / "bench/attention/make_checkpoint.py"),
                            str(bert)], check=True)
        cases.append(("attention compress BERT-base-sized 12 layers R=384",
                      ["attention", "compress", str(bert), "--shared-dim", "384", "--heads", "12",
                       "--quiet", "--out", str(work / "bert12_384.safetensors")]))
    if args.minilm:
        cases.append(("attention compress all-MiniLM-L6-v2 R=192",
                      ["attention", "compress", args.minilm, "--shared-dim", "192", "--quiet",
                       "--out", str(work / "minilm_192.safetensors")]))
    return cases


def start_competitors(count):
    # CPU-bound busy loops, each ended after the measurement (and after 30 minutes at most).
    code = "import time\nend = time.time() + 1800\nwhile time.time() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def run(tenfold, argv, env):
    start = time.perf_counter()
    subprocess.run([tenfold] + argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenfold", default=str(ROOT / "build/tools/tenfold"))
    ap.add_argument("--competitors", default="0,1,2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--minilm", help="all-MiniLM-L6-v2 model.safetensors (config.json beside it)")
    ap.add_argument("--work", help="folder for the generated data (default: a temporary one)")
    ap.add_argument("--quick", action="store_true", help="only the two cp cases")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="tenfold-load-"))
    work.mkdir(parents=True, exist_ok=True)
    cases = make_cases(work, args)
    print(f"machine: {os.cpu_count()} CPUs; tenfold: {args.tenfold}", flush=True)
    results = []
    for competitors in [int(c) for c in args.competitors.split(",")]:
        procs = start_competitors(competitors)
        try:
            time.sleep(1.0 if competitors else 0.0)
            for name, argv in cases:
                times = {s: [] for s in SETTINGS}
                for _ in range(args.reps):
                    for s, extra in SETTINGS.items():
                        times[s].append(run(args.tenfold, argv, clean_environment(extra)))
                med = {s: statistics.median(t) for s, t in times.items()}
                best = min((v, s) for s, v in med.items() if s != "default")
                row = {"case": name, "competitors": competitors, "median_s": med,
                       "all_s": times, "best_explicit": best[1],
                       "ratio": med["default"] / best[0],
                       "load_average": os.getloadavg()[0]}
                results.append(row)
                print(f"{competitors} competing | {name} | default {med['default']:.2f} s | "
                      + " | ".join(f"{s} {v:.2f} s" for s, v in med.items() if s != "default")
                      + f" | ratio {row['ratio']:.2f} | load {row['load_average']:.1f}",
                      flush=True)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
