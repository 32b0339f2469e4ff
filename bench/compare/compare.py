"""Side-by-side timing and memory of Tenfold and TensorLy on the same tensors.

Run through compare.sh, which builds the driver and the virtual environment.
Every measurement runs in its own process (Tenfold: tenfold_compare_driver;
TensorLy: tensorly_runner.py), the two sides interleaved, with the same thread
count, on the same data written once as .npy files (C order for TensorLy,
Fortran order for Tenfold, so that both see mode n as NumPy axis n and sweep
the modes in the same order from the same initial factors).
"""

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
import tensorly as tl

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "tensorly_runner.py")
MIB = 1024.0 * 1024.0


def shape_label(dims):
    if len(set(dims)) == 1:
        return f"{dims[0]}^{len(dims)}"
    return "x".join(str(d) for d in dims)


@dataclass
class Case:
    """One comparison. kind "cp": CP-ALS of a dense tensor, the same initial factors
    on both sides; "attention": the adapter's compression of a query/key layer
    (H x D x D tensor never formed, random start) against TensorLy's parafac of the
    formed tensor (random start of the same law); "tucker": Tenfold's `variants` (sthosvd, hosvd, hooi) against
    TensorLy's tucker: its HOSVD (n_iter_max=0) for sthosvd and hosvd, its HOOI
    (n_iter_max=iters) for hooi, both timed in one TensorLy process; "cp_default": each
    library's CP with nothing but the rank given (Tenfold: nvecs start, compression first
    where it pays, tol 1e-6, at most 100 sweeps; TensorLy: SVD start, tol 1e-8, at most
    100), whole call, in a table of its own: time to each one's answer, not per iteration."""

    kind: str
    dims: tuple
    rank: int  # CP rank, or the multilinear rank of every mode
    iters: int  # fixed iteration count, the same on both sides
    variants: tuple = ("",)  # Tenfold methods compared with the one TensorLy run
    seed: int = 1

    def label(self, variant=""):
        if self.kind == "cp":
            return f"CP {shape_label(self.dims)} R{self.rank}"
        if self.kind == "cp_default":
            return f"CP default {shape_label(self.dims)} R{self.rank}"
        if self.kind == "attention":
            return f"Attention {shape_label(self.dims)} R{self.rank}"
        names = {"sthosvd": "ST-HOSVD", "hosvd": "HOSVD", "hooi": f"HOOI({self.iters})"}
        return f"Tucker {shape_label(self.dims)} r{self.rank} {names[variant]}"

    @property
    def per_iteration(self):
        """Times are per iteration (CP, attention) or per call (Tucker, CP defaults)."""
        return self.kind in ("cp", "attention")


def cases(quick):
    # Iteration counts: enough for each measurement to last well beyond the timer's
    # and the scheduler's noise; the same on both sides.
    if quick:
        return [Case("cp", (100,) * 3, 10, 20), Case("cp", (200,) * 3, 64, 5),
                Case("attention", (12, 384, 384), 192, 5),
                Case("tucker", (100,) * 3, 10, 0, ("sthosvd",)),
                Case("cp_default", (200,) * 3, 64, 0)]
    tucker = ("sthosvd", "hosvd", "hooi")
    return [
        Case("cp", (100,) * 3, 10, 50),
        Case("cp", (200,) * 3, 16, 20),
        Case("cp", (200,) * 3, 64, 20),
        Case("cp", (50,) * 4, 10, 20),
        # BERT-base and a half-width layer; TensorLy costs seconds per iteration at D = 768.
        Case("attention", (12, 768, 768), 384, 5),
        Case("attention", (12, 768, 768), 256, 5),
        Case("attention", (12, 384, 384), 192, 10),
        Case("attention", (12, 384, 384), 128, 10),
        Case("tucker", (200,) * 3, 20, 10, tucker),
        Case("tucker", (300,) * 3, 30, 10, tucker),
        Case("cp_default", (200,) * 3, 64, 0),
        Case("cp_default", (50,) * 4, 10, 0),
    ]


# ----------------------------------------------------------------------------- data


def save(path, a, fortran):
    np.save(path, np.asfortranarray(a) if fortran else np.ascontiguousarray(a))
    return path


def with_noise(x, rng, level=0.1):
    """x plus Gaussian noise of relative norm `level`."""
    noise = rng.standard_normal(x.shape)
    return x + level * np.linalg.norm(x) / np.linalg.norm(noise) * noise


def cp_tensor(dims, rank, rng):
    """Planted rank-R tensor (Gaussian factors) plus 10% noise, float64."""
    return with_noise(tl.cp_to_tensor((None, [rng.standard_normal((d, rank)) for d in dims])), rng)


def tucker_tensor(dims, rank, rng):
    """Planted multilinear rank (r, ..., r) (Gaussian core, orthonormal factors) plus 10% noise."""
    core = rng.standard_normal((rank,) * len(dims))
    factors = [np.linalg.qr(rng.standard_normal((d, rank)))[0] for d in dims]
    return with_noise(tl.tucker_to_tensor((core, factors)), rng)


def attention_layer(heads, width, rng):
    """W_Q, W_K (D x H d, head h owning columns h d ...) with entries N(0, 1/D), and the
    layer's QK tensor T[h] = W_Q^h W_K^h^T / sqrt(d) (H x D x D), float64."""
    d = width // heads
    wq = rng.standard_normal((width, heads * d)) / np.sqrt(width)
    wk = rng.standard_normal((width, heads * d)) / np.sqrt(width)
    q = wq.reshape(width, heads, d).transpose(1, 0, 2)  # (H, D, d): W_Q^h
    k = wk.reshape(width, heads, d).transpose(1, 0, 2)
    return wq, wk, q @ k.transpose(0, 2, 1) / np.sqrt(d)


def write_inputs(case, dtype, folder):
    """Writes the case's input files; returns ({variant: tenfold args}, tensorly args)."""
    rng = np.random.default_rng(case.seed)
    x_f, x_c = os.path.join(folder, "x_f.npy"), os.path.join(folder, "x_c.npy")
    if case.kind == "cp":
        x = cp_tensor(case.dims, case.rank, rng).astype(dtype)
        init = [rng.random((d, case.rank)).astype(dtype) for d in case.dims]
        factor_files = ",".join(
            save(os.path.join(folder, f"u{n}.npy"), u, True) for n, u in enumerate(init))
        common = ["--init", factor_files, "--iters", str(case.iters)]
        save(x_f, x, True)
        save(x_c, x, False)
        return ({"": ["cp", "--tensor", x_f] + common}, ["cp", "--tensor", x_c] + common)
    if case.kind == "cp_default":
        x = cp_tensor(case.dims, case.rank, rng).astype(dtype)
        save(x_f, x, True)
        save(x_c, x, False)
        return ({"": ["cp_default", "--tensor", x_f, "--rank", str(case.rank)]},
                ["cp_default", "--tensor", x_c, "--rank", str(case.rank)])
    if case.kind == "attention":
        heads, width = case.dims[0], case.dims[1]
        wq, wk, t = attention_layer(heads, width, rng)
        init = [rng.random((n, case.rank)).astype(dtype) for n in case.dims]
        factor_files = ",".join(
            save(os.path.join(folder, f"u{n}.npy"), u, True) for n, u in enumerate(init))
        save(x_c, t.astype(dtype), False)
        np.save(os.path.join(folder, "qk.npy"), t)
        tenfold = ["attention", "--query", save(os.path.join(folder, "wq.npy"), wq.astype(dtype), True),
                   "--key", save(os.path.join(folder, "wk.npy"), wk.astype(dtype), True),
                   "--heads", str(heads), "--rank", str(case.rank), "--iters", str(case.iters),
                   "--seed", str(case.seed), "--model-out", folder]
        return ({"": tenfold},
                ["cp", "--tensor", x_c, "--init", factor_files, "--iters", str(case.iters)])
    if case.kind == "tucker":
        x = tucker_tensor(case.dims, case.rank, rng).astype(dtype)
        save(x_f, x, True)
        save(x_c, x, False)
        common = ["--ranks", ",".join([str(case.rank)] * len(case.dims)), "--iters", str(case.iters)]
        return ({v: ["tucker", "--tensor", x_f, "--method", v] + common for v in case.variants},
                ["tucker", "--tensor", x_c] + common)
    raise ValueError(case.kind)


def sthosvd_flops(dims, ranks):
    """Per mode (in Tenfold's order for equal reductions, 0, 1, ...): Gram I_n P (syrk)
    and the shrinking TTM 2 r_n P, P the current size."""
    p, flops = float(np.prod(dims)), 0.0
    for d, r in zip(dims, ranks):
        flops += d * p + 2.0 * r * p
        p *= r / d
    return flops


def useful_flops(case, variant):
    """Flops of the dominant products of one Tenfold iteration (CP) or call (Tucker)."""
    size = float(np.prod(case.dims))
    if case.kind == "cp_default":
        return None  # sweeps of two sizes (core, tensor): no single rate
    if case.kind == "cp":
        # Tensor-sized products per sweep, 2 prod(I) R flops each: the dimension tree's
        # two, or for order 3 one per two updates (docs/algorithms.md), 1.5 per sweep.
        return (3.0 if len(case.dims) == 3 else 4.0) * size * case.rank
    if case.kind == "attention":
        # Kruskal operand with S = D components: per mode, the cross product A_m^T U_m
        # (S x R, refreshed once per sweep) and A_n W, 2 I_n S R flops each.
        return 4.0 * case.dims[1] * case.rank * sum(case.dims)
    ranks = [case.rank] * len(case.dims)
    if variant == "sthosvd":
        return sthosvd_flops(case.dims, ranks)
    if variant == "hosvd":
        # N Grams of the full tensor, then the core (its first TTM dominates).
        return sum(d * size for d in case.dims) + 2.0 * ranks[0] * size
    # HOOI: the ST-HOSVD start, then per sweep two tensor-sized TTMs (2 r prod(I) each).
    return sthosvd_flops(case.dims, ranks) + case.iters * 4.0 * ranks[0] * size


# ----------------------------------------------------------------------- processes


def run_json(cmd, env, timeout=None):
    """Runs one measurement process; its last output line is JSON. None on timeout."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def environment(side, threads, wait_policy, blas_kernel):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    if blas_kernel == "detect":
        # Both OpenBLAS builds (the system's for Tenfold, NumPy's own) pick their kernel
        # for this processor, as they do where nothing pins it.
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    if side == "tensorly":
        return env
    if wait_policy == "default":
        env.pop("OMP_WAIT_POLICY", None)
    else:
        # Tenfold starts no OpenMP team of its own; the setting is kept for comparisons
        # with builds that did.
        env["OMP_WAIT_POLICY"] = wait_policy
    return env


def measure_case(cmds, reps, thread_choices, budget, env_of):
    """Runs every side's command at every thread count of thread_choices, `reps` times,
    interleaved (sides and thread counts in alternating order). A side stops repeating
    once its runs have taken `budget` seconds, and drops a thread count whose run is
    slower than twice its best run so far plus 5 s (the run is stopped there). Returns
    {side: (threads, runs)} for the thread count with the lowest median time."""
    runs = {k: {t: [] for t in thread_choices} for k in cmds}
    best_wall = {k: None for k in cmds}
    dropped = {k: set() for k in cmds}
    spent = {k: 0.0 for k in cmds}
    for rep in range(reps):
        sides = list(cmds) if rep % 2 == 0 else list(cmds)[::-1]
        counts = thread_choices if rep % 2 == 0 else thread_choices[::-1]
        for t in counts:
            for k in sides:
                if t in dropped[k] or (rep > 0 and spent[k] >= budget):
                    continue
                cap = None if best_wall[k] is None else 2 * best_wall[k] + 5
                t0 = time.time()
                run = run_json(cmds[k], env_of(k, t), cap)
                wall = time.time() - t0
                spent[k] += wall
                if run is None:
                    dropped[k].add(t)
                    continue
                runs[k][t].append(run)
                best_wall[k] = wall if best_wall[k] is None else min(best_wall[k], wall)
    out = {}
    for k in cmds:
        done = {t: r for t, r in runs[k].items() if r}
        chosen = min(done, key=lambda t: statistics.median(x["seconds_total"] for x in done[t]))
        out[k] = (chosen, done[chosen])
    return out


def openblas_of(driver, env):
    """Config and kernel of the OpenBLAS the driver loads, queried by loading that
    library in a process with the driver's environment."""
    out = subprocess.run(["ldd", driver], capture_output=True, text=True).stdout
    m = re.search(r"libopenblas\S*\s*=>\s*(\S+)", out)
    if not m:
        return "OpenBLAS not found in ldd output"
    code = """import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.openblas_get_config.restype = lib.openblas_get_corename.restype = ctypes.c_char_p
print(f"{lib.openblas_get_config().decode()}, kernel {lib.openblas_get_corename().decode()}")
"""
    info = subprocess.run([sys.executable, "-c", code, m.group(1)], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()
    return f"{info} ({m.group(1)})"


def numpy_blas(env):
    code = ("import json, numpy; from threadpoolctl import threadpool_info; "
            "print(json.dumps([i for i in threadpool_info() if 'numpy' in i['filepath']]))")
    info = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                     text=True, check=True).stdout)
    return ", ".join(f"{i['internal_api']} {i['version']} ({i['threading_layer']}), kernel "
                     f"{i['architecture']}, {i['num_threads']} threads" for i in info)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def versions():
    import matplotlib
    import tensorly
    return {"python": platform.python_version(), "numpy": np.__version__,
            "tensorly": tensorly.__version__, "matplotlib": matplotlib.__version__}


# ------------------------------------------------------------------------- report


def median(rows, key):
    return statistics.median(r[key] for r in rows)


def tensorly_part(run, variant):
    """The TensorLy measurement a Tenfold variant is compared with: the HOSVD part of a
    Tucker run for sthosvd and hosvd, the whole run otherwise."""
    if variant not in ("sthosvd", "hosvd"):
        return run
    return dict(run, seconds_total=run["seconds_hosvd"], rel_error=run["rel_error_hosvd"],
                peak_rss_kib=run["peak_rss_kib_hosvd"])


def adapter_error_check(folder):
    """The error the adapter reported for the last model it wrote, and the same error
    with the model formed densely in float64."""
    with open(os.path.join(folder, "reported.json")) as f:
        reported = json.load(f)
    t = np.load(os.path.join(folder, "qk.npy"))
    m, a, b = (np.load(os.path.join(folder, f"{n}.npy")).astype(np.float64)
               for n in ("mixing", "query", "key"))
    approx = reported["context_scale"] * ((a[None, :, :] * m[:, None, :]) @ b.T)  # A diag(m_h) B^T
    return reported["rel_error"], float(np.linalg.norm(t - approx) / np.linalg.norm(t))


def summarise(case, variant, dtype, tf_measured, tl_measured, gemm):
    (tf_threads, tf_runs), (tl_threads, tl_runs) = tf_measured, tl_measured
    tl_runs = [tensorly_part(r, variant) for r in tl_runs]
    # Per iteration (CP) or per call (Tucker), median over the repetitions.
    div = case.iters if case.per_iteration else 1
    tf_s = median(tf_runs, "seconds_total") / div
    tl_s = median(tl_runs, "seconds_total") / div
    flops = useful_flops(case, variant)
    row = {
        "case": case.label(variant), "kind": case.kind, "variant": variant, "dtype": dtype,
        "iters": case.iters, "unit": "s/it" if case.per_iteration else "s",
        "runs_tenfold": len(tf_runs), "runs_tensorly": len(tl_runs),
        "threads_tenfold": tf_threads, "threads_tensorly": tl_threads,
        "tenfold_s": tf_s, "tensorly_s": tl_s, "ratio": tl_s / tf_s,
        "tenfold_rel_error": median(tf_runs, "rel_error"),
        "tensorly_rel_error": median(tl_runs, "rel_error"),
        "input_mib": tf_runs[0]["input_bytes"] / MIB,
        "tensorly_input_mib": tl_runs[0]["input_bytes"] / MIB,
        "tenfold_peak_mib": median(tf_runs, "peak_rss_kib") / 1024.0,
        "tensorly_peak_mib": median(tl_runs, "peak_rss_kib") / 1024.0,
        "tenfold_extra_mib":
            statistics.median(r["peak_rss_kib"] - r["rss_loaded_kib"] for r in tf_runs) / 1024.0,
        "tensorly_extra_mib":
            statistics.median(r["peak_rss_kib"] - r["rss_loaded_kib"] for r in tl_runs) / 1024.0,
        "peak_reset": all(r["peak_reset"] for r in tf_runs + tl_runs),
        "tenfold_gflops": None if flops is None else flops / tf_s * 1e-9,
        # Square GEMM of Tenfold's BLAS, measured in each case's process right before it.
        "gemm_gflops": median(tf_runs, "gemm_gflops"),
        "numpy_gemm_gflops": gemm["tensorly"][dtype],
    }
    if "seconds_init" in tf_runs[0]:
        row["tenfold_s_excl_init"] = statistics.median(
            (r["seconds_total"] - r["seconds_init"]) / div for r in tf_runs)
    if case.kind == "cp_default":
        row["iters_tenfold"] = median(tf_runs, "iters")
        row["iters_tensorly"] = median(tl_runs, "iters")
        row["compressed"] = all(r["compressed"] for r in tf_runs)
        row["memory_ok"] = None
        row["target_ratio"] = None
        return row
    # Fractions of the GEMM rate taken per run (against that run's GEMM), then the median.
    row["tenfold_frac_gemm"] = statistics.median(
        flops * div / r["seconds_total"] * 1e-9 / r["gemm_gflops"] for r in tf_runs)
    row["phases_s"] = {k: statistics.median(r["phases"][k] for r in tf_runs) / div
                       for k in tf_runs[0]["phases"]}
    if case.kind == "cp":
        row["mttkrp_frac_gemm"] = statistics.median(
            flops * div / r["phases"]["mttkrp"] * 1e-9 / r["gemm_gflops"] for r in tf_runs)
    row["memory_ok"] = memory_ok(case, variant, row)
    row["target_ratio"] = target_ratio(row["case"], variant, dtype)
    return row


def target_ratio(label, variant, dtype):
    """The speed-up over TensorLy that the CP, Tucker and adapter issues ask for (the CP
    and adapter ones were set in float64)."""
    if dtype == "float64" and label in ("CP 200^3 R64", "CP 50^4 R10"):
        return 3.0
    if dtype == "float64" and label == "Attention 12x768x768 R384":
        return 30.0
    return {"sthosvd": 10.0, "hooi": 5.0}.get(variant)


def memory_ok(case, variant, row):
    """The memory targets, beyond the input: CP-ALS below the input's size when
    R <= min I_n; ST-HOSVD below one copy of the input. None where no target is set."""
    if (case.kind == "cp" and case.rank <= min(case.dims)) or variant == "sthosvd":
        return row["tenfold_extra_mib"] < row["input_mib"]
    if case.kind == "attention":
        # The adapter never allocates anything of the QK tensor's size H D D.
        return row["tenfold_extra_mib"] < row["tensorly_input_mib"]
    return None


def fmt_time(s):
    return f"{s:.4f}" if s < 10 else f"{s:.2f}"


COLUMNS = ["case", "dtype", "iters", "unit", "Tenfold", "TensorLy", "TensorLy/Tenfold", "target",
           "threads Tenfold/TensorLy",
           "rel. error Tenfold", "rel. error TensorLy", "peak MiB Tenfold", "peak MiB TensorLy",
           "beyond input MiB Tenfold", "beyond input MiB TensorLy", "input MiB",
           "Tenfold GFLOP/s", "% of GEMM", "MTTKRP % of GEMM"]


def target_cell(r):
    t = r["target_ratio"]
    if t is None:
        return ""
    return f">= {t:g} " + ("✓" if r["ratio"] >= t else "✗")


def table_cells(r):
    mttkrp = r.get("mttkrp_frac_gemm")
    ok = {True: " ✓", False: " ✗", None: ""}[r["memory_ok"]]
    return [r["case"], r["dtype"], str(r["iters"]), r["unit"], fmt_time(r["tenfold_s"]),
            fmt_time(r["tensorly_s"]), f"{r['ratio']:.1f}", target_cell(r),
            f"{r['threads_tenfold']}/{r['threads_tensorly']}",
            f"{r['tenfold_rel_error']:.6f}", f"{r['tensorly_rel_error']:.6f}",
            f"{r['tenfold_peak_mib']:.0f}", f"{r['tensorly_peak_mib']:.0f}",
            f"{r['tenfold_extra_mib']:.1f}{ok}", f"{r['tensorly_extra_mib']:.1f}",
            f"{r['input_mib']:.1f}", f"{r['tenfold_gflops']:.1f}",
            f"{100 * r['tenfold_frac_gemm']:.0f}%",
            "" if mttkrp is None else f"{100 * mttkrp:.0f}%"]


DEFAULT_COLUMNS = ["case", "dtype", "Tenfold s (sweeps)", "TensorLy s (sweeps)",
                   "TensorLy/Tenfold", "threads Tenfold/TensorLy", "rel. error Tenfold",
                   "rel. error TensorLy", "compressed", "peak MiB Tenfold", "peak MiB TensorLy"]


def default_cells(r):
    return [r["case"], r["dtype"], f"{fmt_time(r['tenfold_s'])} ({r['iters_tenfold']:g})",
            f"{fmt_time(r['tensorly_s'])} ({r['iters_tensorly']:g})", f"{r['ratio']:.1f}",
            f"{r['threads_tenfold']}/{r['threads_tensorly']}",
            f"{r['tenfold_rel_error']:.6f}", f"{r['tensorly_rel_error']:.6f}",
            "yes" if r["compressed"] else "no",
            f"{r['tenfold_peak_mib']:.0f}", f"{r['tensorly_peak_mib']:.0f}"]


def markdown_table(rows):
    """The per-iteration and per-call table, then the defaults' table (time to each
    library's own answer) when there are such rows."""
    same = [r for r in rows if r["kind"] != "cp_default"]
    defaults = [r for r in rows if r["kind"] == "cp_default"]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(table_cells(r)) + " |" for r in same]
    if defaults:
        lines += ["", "Every default on (whole call, each library's own stopping rule):", "",
                  "| " + " | ".join(DEFAULT_COLUMNS) + " |", "|" + "---|" * len(DEFAULT_COLUMNS)]
        lines += ["| " + " | ".join(default_cells(r)) + " |" for r in defaults]
    return "\n".join(lines)


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r["case"] for r in rows))
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 4.2))
    width = 0.8 / len(dtypes)
    for k, dt in enumerate(dtypes):
        ratio = {r["case"]: r["ratio"] for r in rows if r["dtype"] == dt}
        xs = [i + (k - (len(dtypes) - 1) / 2) * width for i in range(len(labels))]
        ys = [ratio.get(lab, np.nan) for lab in labels]
        bars = ax.bar(xs, ys, width, label=dt)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
        targets = {r["case"]: r["target_ratio"] for r in rows if r["dtype"] == dt}
        tx = [x for x, lab in zip(xs, labels) if targets.get(lab)]
        ty = [targets[lab] for lab in labels if targets.get(lab)]
        ax.scatter(tx, ty, marker="_", s=300, color="black", zorder=3,
                   label="target" if k == 0 and tx else None)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("TensorLy time / Tenfold time")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--driver", help="path of tenfold_compare_driver")
    p.add_argument("--from-json", metavar="RESULTS",
                   help="only rewrite table.md and ratios.png beside a results.json")
    p.add_argument("--quick", action="store_true",
                   help="a subset in float64, one repetition (under a minute)")
    p.add_argument("--reps", type=int, help="most repetitions per case and side (default 3, quick 1)")
    p.add_argument("--threads", type=int, default=2,
                   help="threads of each side: the faster of 1 and this many (default 2)")
    p.add_argument("--fixed-threads", action="store_true",
                   help="run both sides at exactly --threads threads")
    p.add_argument("--budget", type=float, default=20.0,
                   help="seconds per case and side after which repetitions stop (default 20)")
    p.add_argument("--omp-wait-policy", default="default", choices=["passive", "active", "default"],
                   help="OMP_WAIT_POLICY of the Tenfold side (default: unset, as users run it)")
    p.add_argument("--blas-kernel", default="detect", choices=["detect", "environment"],
                   help="detect (default): both OpenBLAS builds pick their kernel for this "
                   "processor (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed for both sides); "
                   "environment: both sides keep the caller's settings")
    p.add_argument("--dtypes", help="comma-separated (default float64,float32; quick float64)")
    p.add_argument("--only", help="run only cases whose label contains this text")
    p.add_argument("--out", default="build/compare", help="folder for results.json, table.md, ratios.png")
    args = p.parse_args()
    if args.from_json:
        rewrite_report(args.from_json)
        return
    if not args.driver:
        p.error("--driver is required")
    reps = args.reps or (1 if args.quick else 3)
    dtypes = args.dtypes.split(",") if args.dtypes else (["float64"] if args.quick else
                                                         ["float64", "float32"])
    start = time.time()
    os.makedirs(args.out, exist_ok=True)
    def env_of(side, threads):
        return environment("tensorly" if side == "tensorly" else "tenfold", threads,
                           args.omp_wait_policy, args.blas_kernel)

    tf_env, tl_env = env_of("tenfold", args.threads), env_of("tensorly", args.threads)
    # Each side runs at its faster of 1 and --threads threads (see measure_case), or at
    # exactly --threads with --fixed-threads.
    thread_choices = [args.threads] if args.fixed_threads else sorted({1, args.threads})
    tf_version = run_json([args.driver, "version", "--dtype", "float64"], tf_env)["version"]

    commit = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    header = {
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "tenfold_commit": commit,
        "load_average_start": os.getloadavg(),
        "threads": args.threads,
        "fixed_threads": args.fixed_threads,
        "omp_wait_policy": args.omp_wait_policy,
        "blas_kernel": args.blas_kernel,
        "tenfold": tf_version,
        "tenfold_blas": openblas_of(args.driver, tf_env),
        "numpy_blas": numpy_blas(tl_env),
        **versions(),
    }
    print(f"Tenfold {tf_version} ({commit}) vs TensorLy {header['tensorly']} (NumPy {header['numpy']}, "
          f"Python {header['python']}), {threads_description(header)}, "
          f"Tenfold's OMP_WAIT_POLICY {args.omp_wait_policy}")
    print(f"machine: {header['machine']}; load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    if os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        print(f"warning: the machine is busy (load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores): times will be noisy and threaded code slowed down")
    print(f"Tenfold BLAS: {header['tenfold_blas']}")
    print(f"NumPy BLAS: {header['numpy_blas']}")

    # Same-run GEMM rates (square, each side's own BLAS); the driver measures a
    # smaller one again before every case.
    n = 1000 if args.quick else 4000
    case_gemm = 1000 if args.quick else 1500
    gemm = {"tenfold": {}, "tensorly": {}}
    for dt in dtypes:
        gemm["tenfold"][dt] = run_json(
            [args.driver, "gemm", "--dtype", dt, "--size", str(n)], tf_env)["gflops"]
        gemm["tensorly"][dt] = run_json(
            [sys.executable, RUNNER, "gemm", "--dtype", dt, "--size", str(n)], tl_env)["gflops"]
        print(f"GEMM {n}^3 {dt}: Tenfold's BLAS {gemm['tenfold'][dt]:.1f} GFLOP/s, "
              f"NumPy {gemm['tensorly'][dt]:.1f} GFLOP/s")
    header["gemm_size"] = n
    header["case_gemm_size"] = case_gemm
    header["gemm_gflops"] = gemm
    print()

    rows = []
    work = tempfile.mkdtemp(prefix="tenfold-compare-")
    try:
        for case in cases(args.quick):
            if args.only and not any(args.only in case.label(v) for v in case.variants):
                continue
            for dt in dtypes:
                folder = os.path.join(work, "case")
                os.makedirs(folder)
                tf_args, tl_args = write_inputs(case, dt, folder)
                cmds = {v: [args.driver] + a + ["--dtype", dt, "--gemm-size", str(case_gemm)]
                        for v, a in tf_args.items()}
                cmds["tensorly"] = [sys.executable, RUNNER] + tl_args + ["--dtype", dt]
                measured = measure_case(cmds, reps, thread_choices, args.budget, env_of)
                check = adapter_error_check(folder) if case.kind == "attention" else None
                shutil.rmtree(folder)
                for v in tf_args:
                    row = summarise(case, v, dt, measured[v], measured["tensorly"], gemm)
                    if check is not None:
                        row["adapter_error_reported"], row["adapter_error_dense"] = check
                        print(f"  adapter's reported error {check[0]:.12f}, "
                              f"formed densely {check[1]:.12f}")
                    rows.append(row)
                    print(f"{row['case']:<28} {dt}: Tenfold {fmt_time(row['tenfold_s'])} "
                          f"{row['unit']}, TensorLy {fmt_time(row['tensorly_s'])} {row['unit']}, "
                          f"ratio {row['ratio']:.1f}; rel. error {row['tenfold_rel_error']:.6f} / "
                          f"{row['tensorly_rel_error']:.6f}; peak {row['tenfold_peak_mib']:.0f} / "
                          f"{row['tensorly_peak_mib']:.0f} MiB; threads {row['threads_tenfold']}/"
                          f"{row['threads_tensorly']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    header["load_average_end"] = os.getloadavg()
    header["seconds"] = time.time() - start
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"header": header, "rows": rows}, f, indent=1)
    print()
    write_report(header, rows, args.out)
    print(f"\n{time.time() - start:.0f} s; load average at the end "
          f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"wrote {args.out}/results.json, table.md, ratios.png")


def threads_description(header):
    if header["fixed_threads"] or header["threads"] == 1:
        return f"{header['threads']} threads each"
    return f"each side at its faster of 1 and {header['threads']} threads"


def write_report(header, rows, out):
    """Prints the table and writes table.md and ratios.png."""
    table = markdown_table(rows)
    print(table)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table + "\n")
    same = [r for r in rows if r["kind"] != "cp_default"]
    if same:  # the ratio plot is of the per-iteration and per-call rows
        plot(same, os.path.join(out, "ratios.png"),
             f"TensorLy time / Tenfold time, same run ({threads_description(header)}, load average "
             f"{header['load_average_start'][0]:.1f} to {header['load_average_end'][0]:.1f}); "
             "higher is better")


def rewrite_report(path):
    """Table and plot again from a results.json (targets as the current code sets them)."""
    with open(path) as f:
        results = json.load(f)
    for r in results["rows"]:
        r["target_ratio"] = target_ratio(r["case"], r["variant"], r["dtype"])
    write_report(results["header"], results["rows"], os.path.dirname(os.path.abspath(path)))


if __name__ == "__main__":
    main()
