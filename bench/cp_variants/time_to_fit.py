"""Time to a good answer: seconds until CP reaches 99.9 % of the fit of a converged plain
ALS run, Tenfold (the `tenfold` program) against TensorLy in the same run.

    python time_to_fit.py --cli build/tools/tenfold [--cases 200,400,50x4,covid,il2]
                          [--tensorly-limit 600]
    python time_to_fit.py --cli build/tools/tenfold --cases missing

Run it with the interpreter of bench/compare's environment (TensorLy, NumPy, SciPy).
Prints one Markdown table.

missing: tenfold's two solvers for missing values, EM and weighted ALS, on IL-2 (rank 3)
and on a planted 30x20x10 rank-3 tensor (1 % noise) with 30 % and 70 % of its entries
hidden: sweeps and seconds to 99.9 % of the fit of a converged EM run (nvecs start, tol
1e-10), and the final fit (default tol 1e-6), from the default (nvecs) start and from
the random start of seed 0.

For each tensor, the reference is tenfold's plain ALS (nvecs start, no line search, no
compression) run to --tol 1e-9; the target is 0.999 times its fit. Every method then
runs with its own defaults and the seconds at which its fit first reaches the target
are taken from its per-iteration progress (tenfold: the progress lines, time since the
call began, so the start and the compression are included; TensorLy: a callback, time
since parafac was called, its SVD start included). Loading the .npy file is not counted
on either side. Columns: tenfold plain (--compress off), --line-search, --compress on,
the default (no flag), TensorLy's default parafac (init="svd") and its linesearch=True;
each cell is "seconds (sweeps)" (TensorLy's line-search sweeps count once each).
The synthetic tensors are I^N with Gaussian rank-R factors plus 10 % Gaussian noise.
IL-2 has missing values: tenfold runs EM-ALS (--missing nan; neither line search nor
compression applies to it) and TensorLy parafac(mask=...), fits over the observed
entries.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorly as tl
from tensorly.decomposition import parafac

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "tests", "data")
PROGRESS = re.compile(r"iter\s+(\d+)\s+fit\s+(\S+)\s+change\s+\S+\s+(\S+) s")


def gaussian_case(dims, rank, seed):
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((d, rank)) for d in dims]
    x = tl.cp_to_tensor((None, factors))
    noise = rng.standard_normal(x.shape)
    return x + 0.1 * np.linalg.norm(x) / np.linalg.norm(noise) * noise


def cases(names):
    for name in names:
        if name == "200":
            yield "200^3 R64", gaussian_case((200,) * 3, 64, 1), 64, None
        elif name == "400":
            yield "400^3 R32", gaussian_case((400,) * 3, 32, 2), 32, None
        elif name == "50x4":
            yield "50^4 R10", gaussian_case((50,) * 4, 10, 3), 10, None
        elif name == "covid":
            x = np.load(os.path.join(DATA, "COVID19_data.npy")).astype(np.float64)
            yield f"COVID-19 {'x'.join(map(str, x.shape))} R5", x, 5, None
        elif name == "il2":
            x = np.load(os.path.join(DATA, "IL2_Response_Tensor.npy")).astype(np.float64)
            yield f"IL-2 {'x'.join(map(str, x.shape))} R3 (masked)", x, 3, ~np.isnan(x)


def run_tenfold(cli, path, rank, flags, tmp):
    """(report, [(seconds, fit) per iteration]) of `tenfold cp` with progress lines."""
    out = os.path.join(tmp, "out")
    cmd = [cli, "cp", path, "--rank", str(rank), "--out", out, *flags]
    p = subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    trace = [(float(m.group(3)), float(m.group(2))) for m in PROGRESS.finditer(p.stderr)]
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f), trace


def run_tensorly(x, rank, mask, target, linesearch, limit):
    """[(seconds, fit)] of TensorLy's parafac with its defaults (stops at the target, or
    after `limit` seconds)."""
    trace = []
    t0 = time.perf_counter()

    def progress(_cp, rec_error):
        trace.append((time.perf_counter() - t0, 1.0 - float(rec_error)))
        return trace[-1][1] >= target or trace[-1][0] > limit  # True stops the iteration

    xin = np.where(mask, x, x[mask].mean()) if mask is not None else x
    parafac(xin, rank, n_iter_max=1000, init="svd", linesearch=linesearch,
            mask=None if mask is None else mask.astype(np.float64), callback=progress)
    return trace[1:]  # the first call is the start, before any sweep


def reached(trace, target):
    """(seconds, sweeps) at the first fit >= target, or None."""
    for k, (seconds, fit) in enumerate(trace):
        if fit >= target:
            return seconds, k + 1
    return None


def cell(hit, trace):
    if hit is None:
        return f"not reached in {trace[-1][0]:.3g} s ({trace[-1][1]:.5f})" if trace else "n/a"
    return f"{hit[0]:.3g} ({hit[1]})"


def missing_table(cli, tmp):
    runs = [("em", "auto"), ("weighted", "auto"), ("em", "random"), ("weighted", "random")]
    print("| tensor | target fit | " + " | ".join(f"{s} from {i}" for s, i in runs) + " |")
    print("| --- | --- |" + " --- |" * len(runs))
    il2 = np.load(os.path.join(DATA, "IL2_Response_Tensor.npy")).astype(np.float64)
    rng = np.random.default_rng(4)
    planted = tl.cp_to_tensor((None, [rng.standard_normal((d, 3)) for d in (30, 20, 10)]))
    noise = rng.standard_normal(planted.shape)
    planted = planted + 0.01 * np.linalg.norm(planted) / np.linalg.norm(noise) * noise
    tensors = [("IL-2 R3 (192 of 4992 missing)", il2)]
    for hidden in (0.3, 0.7):
        x = planted.copy()
        x[rng.uniform(size=x.shape) < hidden] = np.nan
        tensors.append((f"30x20x10 R3, {hidden:.0%} hidden", x))
    for label, x in tensors:
        path = os.path.join(tmp, "x.npy")
        np.save(path, np.asfortranarray(x))
        flags = ["--missing", "nan", "--max-iters", "5000"]
        ref, _ = run_tenfold(cli, path, 3, [*flags, "--tol", "1e-10", "-q"], tmp)
        target = 0.999 * ref["fit"]
        cells = []
        for solver, init in runs:
            rep, trace = run_tenfold(cli, path, 3, [*flags, "--missing-solver", solver, "--init",
                                                    init], tmp)
            hit = next((i for i, (_, f) in enumerate(trace) if f >= target), None)
            reached = "not reached" if hit is None else f"{hit + 1} sweeps, {trace[hit][0]:.3g} s"
            cells.append(f"{reached}; final {rep['fit']:.5f}")
        print(f"| {label} | {target:.5f} | " + " | ".join(cells) + " |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", required=True, help="path of the tenfold program")
    p.add_argument("--cases", default="200,400,50x4,covid,il2")
    p.add_argument("--tensorly-limit", type=float, default=600,
                   help="stop a TensorLy run after this many seconds")
    args = p.parse_args()
    tl.set_backend("numpy")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    if args.cases == "missing":
        with tempfile.TemporaryDirectory() as tmp:
            missing_table(args.cli, tmp)
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
        return
    print("| tensor | target fit | tenfold plain | --line-search | --compress on | tenfold "
          "default | TensorLy default | TensorLy linesearch | default vs TensorLy default |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for label, x, rank, mask in cases(args.cases.split(",")):
            path = os.path.join(tmp, "x.npy")
            np.save(path, np.asfortranarray(x))  # tenfold's modes are the NumPy axes
            missing = ["--missing", "nan"] if mask is not None else []
            ref, _ = run_tenfold(args.cli, path, rank, ["--compress", "off", "--tol", "1e-9",
                                                        "--max-iters", "2000", "-q", *missing],
                                 tmp)
            target = 0.999 * ref["fit"]
            runs = [["--compress", "off"], ["--compress", "off", "--line-search"],
                    ["--compress", "on"], []]
            traces = []
            for flags in runs:
                if mask is not None and flags and flags[-1] != "off":
                    traces.append(None)  # neither applies to missing values
                    continue
                traces.append(run_tenfold(args.cli, path, rank, [*flags, *missing,
                                                                 "--max-iters", "1000"],
                                          tmp)[1])
            for ls in (False, True):
                traces.append(run_tensorly(x, rank, mask, target, ls, args.tensorly_limit))
            hits = [None if t is None else reached(t, target) for t in traces]
            cells = ["n/a" if t is None else cell(h, t) for h, t in zip(hits, traces)]
            ratio = f"{hits[4][0] / hits[3][0]:.1f}x" if hits[3] and hits[4] else "-"
            print(f"| {label} | {target:.5f} | " + " | ".join(cells) + f" | {ratio} |",
                  flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
