"""Two builds of Tenfold against each other, sweep time of plain CP-ALS, alternated.

    python bench/compare/ab.py OLD_DRIVER NEW_DRIVER [--size 200] [--rank 64]
        [--iters 40] [--rounds 10] [--dtypes float64,float32] [--cpu] [--gemm-size N]

OLD_DRIVER and NEW_DRIVER are two builds' bench/tenfold_compare_driver; run it with the
interpreter of compare.py's environment (it takes compare.py's planted tensor). Each round
runs both on the same planted tensor (rank `rank` plus 10 % noise) from the same start,
`iters` sweeps with compression off, one after the other (which goes first alternates
with the round); the time of a run is the driver's `seconds_total` (the sweeps and their
fit, not the loading). On a machine whose speed drifts (a shared virtual machine), the
ratio of two adjacent runs sees the same conditions: the median of those ratios is the
figure to quote, the medians of each side's times only beside it.

--cpu also runs each side for iters / 5 sweeps and reports the process's CPU seconds per
sweep (the difference of the two runs' CPU times over the difference of their sweeps, so
that loading and warming up cancel): on a loaded machine, where other processes take the
cores in turns, CPU time moves less than wall time. --gemm-size N has each run measure
the square GEMM rate of size N first, in its own process, and prints each run's sweep
rate (3 numel R flops a sweep) as a share of it.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile

import numpy as np

from compare import cp_tensor


def write_case(folder, size, rank, dtype, seed=1):
    rng = np.random.default_rng(seed)
    x = cp_tensor((size,) * 3, rank, rng)
    tensor = os.path.join(folder, f"x_{dtype}.npy")
    np.save(tensor, np.asfortranarray(x.astype(dtype)))
    starts = []
    for n in range(3):
        starts.append(os.path.join(folder, f"u{n}_{dtype}.npy"))
        np.save(starts[-1], np.asfortranarray(rng.random((size, rank)).astype(dtype)))
    return tensor, ",".join(starts)


def run_driver(driver, tensor, starts, iters, dtype, gemm_size=None):
    """The driver's JSON line and the CPU seconds its process used."""
    extra = ["--gemm-size", str(gemm_size)] if gemm_size else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([driver, "cp", "--tensor", tensor, "--init", starts, "--iters",
                          str(iters), "--dtype", dtype] + extra, capture_output=True, text=True,
                         check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out), cpu


def measure(driver, tensor, starts, a, dtype):
    """Seconds a sweep, the share of the same run's GEMM rate (or None), CPU seconds a
    sweep (or None)."""
    out, cpu = run_driver(driver, tensor, starts, a.iters, dtype, a.gemm_size)
    sweep = out["seconds_total"] / a.iters
    flops = 3.0 * a.size**3 * a.rank  # a 3-way sweep: 1.5 contractions of 2 numel R
    share = flops / sweep * 1e-9 / out["gemm_gflops"] if a.gemm_size else None
    cpu_sweep = None
    if a.cpu:
        few = max(1, a.iters // 5)
        _, cpu_few = run_driver(driver, tensor, starts, few, dtype, a.gemm_size)
        cpu_sweep = (cpu - cpu_few) / (a.iters - few)
    return sweep, share, cpu_sweep


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rank", type=int, default=64)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--dtypes", default="float64,float32")
    p.add_argument("--cpu", action="store_true", help="also CPU seconds a sweep")
    p.add_argument("--gemm-size", type=int, help="each run's sweep rate over its GEMM rate")
    a = p.parse_args()
    flops = 3.0 * a.size**3 * a.rank  # a 3-way sweep: 1.5 contractions of 2 numel R
    print(f"load average at the start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="tenfold-ab-") as folder:
        for dtype in a.dtypes.split(","):
            tensor, starts = write_case(folder, a.size, a.rank, dtype)
            times, shares, cpus = ({"old": [], "new": []} for _ in range(3))
            for r in range(a.rounds):
                order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
                for side in order:
                    driver = a.old if side == "old" else a.new
                    sweep, share, cpu = measure(driver, tensor, starts, a, dtype)
                    times[side].append(sweep)
                    shares[side].append(share)
                    cpus[side].append(cpu)
            ratios = [o / n for o, n in zip(times["old"], times["new"])]
            print(f"{a.size}^3 R{a.rank} {dtype}: old/new time, median of {a.rounds} adjacent "
                  f"pairs {statistics.median(ratios):.3f} (each "
                  f"{' '.join(f'{v:.2f}' for v in ratios)})")
            for side in ("old", "new"):
                med = statistics.median(times[side])
                print(f"  {side}: median {med * 1e3:.2f} ms a sweep, min "
                      f"{min(times[side]) * 1e3:.2f} ({flops / med * 1e-9:.0f} GFLOP/s at 3 numel R "
                      f"a sweep)")
                if a.gemm_size:
                    print(f"    of the same run's GEMM: "
                          f"{' '.join(f'{100 * v:.0f}' for v in shares[side])} %")
                if a.cpu:
                    print(f"    CPU: median {statistics.median(cpus[side]) * 1e3:.2f} ms a sweep")
            if a.cpu:
                cpu_ratios = [o / n for o, n in zip(cpus["old"], cpus["new"])]
                print(f"  old/new CPU time, median of {a.rounds} adjacent pairs "
                      f"{statistics.median(cpu_ratios):.3f} (each "
                      f"{' '.join(f'{v:.2f}' for v in cpu_ratios)})")
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
