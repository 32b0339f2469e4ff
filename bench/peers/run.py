"""Tenfold side by side with the C++ peers, in one run, on the same tensors.

    python bench/peers/run.py --out DIR [--quick] [--reps N] [--threads 2] [--mpi 1,2]
                              [--dtypes float64,float32]

Dense CP-ALS (`tenfold cp --compress off`, one start) against GenTen's driver
(`genten --method cp-als`, with its default dense MTTKRP and with its GEMM-based
`--mttkrp-method phan`), and ST-HOSVD (`tenfold tucker --method sthosvd`) against
TuckerMPI's drivers (on-node `Tucker_sthosvd`; distributed `sthosvd` under mpirun
against `mpirun tenfold tucker`). Every measurement is its own process; the two sides
alternate (which one goes first alternates with the repetition) with the same thread
count. CP runs start both sides from the same factors (written once as .npy files for
Tenfold and as a GenTen K-tensor text file) and run a fixed number of sweeps (tol 0).
CP in float32 (`--dtypes`) runs GenTen's float build (`--genten-float`, built with
FLOAT_TYPE=float) on the same file, which it rounds to float as it reads it, against
Tenfold on a float32 copy of the .npy (the same rounding); the start is the same.

The tensors are written once into --data (default /tmp/peers-data, kept between
runs): for each, a Fortran-order .npy for Tenfold and the same bytes in the peer's
format (GenTen's binary dense format: "dntn" header then the values, first index
fastest; TuckerMPI: raw values, first index fastest), so that mode n is NumPy axis n on
every side.

Peak memory is the largest resident set of the process tree (os.wait4's ru_maxrss:
under mpirun, the largest single process). DIR receives results.json (every run) and
results.md (the tables, min and median over the repetitions, with the load average).
"""

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def shape_label(dims):
    return f"{dims[0]}^{len(dims)}" if len(set(dims)) == 1 else "x".join(map(str, dims))


# ---------------------------------------------------------------------------- data


def planted_cp(dims, rank, noise, seed):
    """Gaussian rank-`rank` tensor plus `noise` relative Gaussian noise, as a C-order
    array Y whose transpose X = Y.T (Fortran order) is the tensor of shape `dims`."""
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((d, rank)) for d in dims]
    # Y[i_N-1, ..., i_0] = sum_r prod_n A_n[i_n, r]: the modes reversed; as a matrix,
    # (A_N-1 kr ... kr A_1) A_0^T with the Khatri-Rao rows in C order.
    kr = factors[-1]
    for f in factors[-2:0:-1]:
        kr = (kr[:, None, :] * f[None, :, :]).reshape(-1, rank)
    y = (kr @ factors[0].T).reshape(dims[::-1])
    add_noise(y, noise, rng)
    return y


def planted_tucker(dims, ranks, noise, seed):
    """Tucker tensor (Gaussian core of size `ranks`, orthonormal factors) plus noise, as
    in planted_cp (C-order Y, tensor X = Y.T)."""
    rng = np.random.default_rng(seed)
    y = rng.standard_normal(ranks[::-1])
    for axis, (d, r) in enumerate(zip(dims[::-1], ranks[::-1])):
        q, _ = np.linalg.qr(rng.standard_normal((d, r)))
        y = np.moveaxis(np.tensordot(q, y, axes=([1], [axis])), 0, axis)
    y = np.ascontiguousarray(y)
    add_noise(y, noise, rng)
    return y


def add_noise(y, noise, rng):
    if noise <= 0:
        return
    flat = y.reshape(-1)
    scale = noise * np.linalg.norm(flat) / np.sqrt(flat.size)
    chunk = 1 << 24
    for s in range(0, flat.size, chunk):
        flat[s : s + chunk] += scale * rng.standard_normal(min(chunk, flat.size - s))


def write_tensor(base, y, peer):
    """base.npy (Fortran order, for Tenfold) and base.<peer>: the same values, first
    index fastest, in the peer's format."""
    x = y.T  # Fortran-contiguous view: X's column-major bytes are Y's bytes.
    np.save(base + ".npy.tmp.npy", x)
    os.replace(base + ".npy.tmp.npy", base + ".npy")
    dims = x.shape
    tmp = base + "." + peer + ".tmp"
    with open(tmp, "wb") as f:
        if peer == "genten":
            # GenTen's binary dense header: magic, ndims (u32), value bits (u32), the
            # sizes (u64 each), the number of values (u64).
            f.write(b"dntn" + struct.pack("<II", len(dims), 64))
            f.write(struct.pack(f"<{len(dims)}Q", *dims))
            f.write(struct.pack("<Q", x.size))
        y.tofile(f)
    os.replace(tmp, base + "." + peer)


def ensure_tensor(data, name, make, peer):
    base = os.path.join(data, name)
    if not (os.path.exists(base + ".npy") and os.path.exists(base + "." + peer)):
        print(f"writing {base}.npy and .{peer}", flush=True)
        write_tensor(base, make(), peer)
    return base


def write_start(data, name, dims, rank, seed):
    """The same start for both sides: uniform [0, 1) factors, as Tenfold's
    --init-factors folder and as a GenTen K-tensor text file (weights 1)."""
    folder = os.path.join(data, name + ".start")
    gfile = folder + ".genten.txt"
    if os.path.isdir(folder) and os.path.exists(gfile):
        return folder, gfile
    rng = np.random.default_rng(seed)
    factors = [rng.random((d, rank)) for d in dims]
    os.makedirs(folder, exist_ok=True)
    for a, f in enumerate(factors):
        np.save(os.path.join(folder, f"factor_{a}.npy"), f)
    with open(gfile + ".tmp", "w") as f:
        f.write(f"ktensor\n{len(dims)}\n{' '.join(map(str, dims))}\n{rank}\n")
        f.write(" ".join(["1"] * rank) + "\n")
        for m in factors:
            f.write(f"matrix\n2\n{m.shape[0]} {m.shape[1]}\n")
            np.savetxt(f, m, fmt="%.17g")
    os.replace(gfile + ".tmp", gfile)
    return folder, gfile


# ---------------------------------------------------------------------------- running


def run(cmd, env, cwd=None, log=None):
    """Runs cmd; returns (stdout+stderr, wall seconds, peak RSS MiB of the tree)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if log:
        with open(log, "a") as f:
            f.write("$ " + " ".join(cmd) + "\n" + out + "\n")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{out[-3000:]}")
    return out, wall, usage.ru_maxrss / 1024.0


def env_with(threads, wait_policy=None):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy
    return env


def mpirun(procs):
    return ["mpirun", "--allow-run-as-root", "--bind-to", "none", "-np", str(procs)] + (
        ["--oversubscribe"] if procs > (os.cpu_count() or 1) else []
    )


def versions_of(path):
    """A build's versions.txt: commits, versions, compiler and BLAS (its configuration
    lines are left out of the results)."""
    with open(path) as f:
        return "".join(line for line in f if not line.startswith(("flags ", "targets ")))


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def float32_copy(base):
    """base.float32.npy: the tensor of base.npy rounded to float32 (Fortran order kept)."""
    path = base + ".float32.npy"
    if not os.path.exists(path):
        x = np.load(base + ".npy", mmap_mode="r")
        np.save(path + ".tmp.npy", np.asfortranarray(x, dtype=np.float32))
        os.replace(path + ".tmp.npy", path)
    return path


def tenfold_cp(a, base, start, rank, iters, work, env, log, dtype):
    out_dir = os.path.join(work, "tenfold_cp")
    shutil.rmtree(out_dir, ignore_errors=True)
    tensor = base + ".npy" if dtype == "float64" else float32_copy(base)
    cmd = [a.tenfold, "cp", tensor, "--rank", str(rank), "--out", out_dir,
           "--max-iters", str(iters), "--tol", "0", "--compress", "off", "--n-starts", "1",
           "--init-factors", start, "--quiet"]
    _, wall, rss = run(cmd, env, log=log)
    with open(os.path.join(out_dir, "report.json")) as f:
        rep = json.load(f)
    t = rep["timings"]
    sweep = rep["seconds"] - t["init"] - t["compress"]
    return {"iterations": rep["iterations"], "fit": rep["fit"], "seconds": rep["seconds"],
            "per_iteration": sweep / rep["iterations"], "wall": wall, "rss_mib": rss,
            "phases": t}


def genten_for(a, dtype):
    """The GenTen driver of that precision: its double build, or its float build."""
    return a.genten if dtype == "float64" else a.genten_float


def genten_cp(a, base, gstart, rank, iters, work, env, log, dtype, mttkrp=None):
    """GenTen's CP-ALS (its float build for float32); mttkrp None: its default dense
    MTTKRP (row-based, a Kokkos loop over the tensor's entries), or "phan": its GEMM-based
    one (--mttkrp-method phan)."""
    cmd = [genten_for(a, dtype), "--input", base + ".genten", "--dense", "--method", "cp-als",
           "--rank", str(rank), "--maxiters", str(iters), "--tol", "0", "--printitn", "1",
           "--timings", "--initial-file", gstart, "--history-file", "genten_history.txt"]
    if mttkrp:
        cmd += ["--mttkrp-method", mttkrp]
    out, wall, rss = run(cmd, env, cwd=work, log=log)
    m = re.search(r"CP-ALS completed (\d+) iterations in (\S+) seconds", out)
    fit = re.findall(r"Final fit = \s*(\S+)", out)
    mt = re.search(r"MTTKRP total time = (\S+) seconds", out)
    if not m or not fit:
        raise RuntimeError("unexpected GenTen output:\n" + out[-3000:])
    # The "completed" count is one more than the sweeps run (GenTen increments it after
    # the loop); the progress lines count the sweeps.
    its, secs = len(re.findall(r"^Iter\s+\d+: fit", out, re.M)), float(m.group(2))
    # Its history (iteration, ..., cumulative seconds in column 7): the sweeps are the time
    # from iteration 0 (after the start's fit, an elementwise pass over the tensor) to
    # iteration `its`.
    with open(os.path.join(work, "genten_history.txt")) as f:
        hist = {int(r[0]): float(r[6]) for r in (line.split() for line in f.readlines()[1:])}
    return {"iterations": its, "fit": float(fit[-1]), "seconds": secs,
            "per_iteration": (hist[its] - hist[0]) / its, "wall": wall, "rss_mib": rss,
            "phases": {"mttkrp": float(mt.group(1)) if mt else None}}


def tenfold_tucker(a, base, ranks, tol, procs, work, env, log):
    out_dir = os.path.join(work, "tenfold_tucker")
    shutil.rmtree(out_dir, ignore_errors=True)
    sel = ["--ranks", ",".join(map(str, ranks))] if ranks else ["--tol", repr(tol)]
    cmd = [a.tenfold, "tucker", base + ".npy", "--method", "sthosvd", "--out", out_dir] + sel
    if procs:
        cmd = mpirun(procs) + cmd + ["--grid", "x".join(["1"] * (len(a.dims) - 1) + [str(procs)])]
    _, wall, rss = run(cmd, env, log=log)
    with open(os.path.join(out_dir, "report.json")) as f:
        rep = json.load(f)
    return {"seconds": rep["seconds"], "relative_error": rep["relative_error"],
            "ranks": rep["ranks"], "wall": wall, "rss_mib": rss, "phases": rep["timings"]}


def tucker_peer(a, base, ranks, tol, procs, work, env, log):
    d = fresh_dir(os.path.join(work, "tucker"))
    with open(os.path.join(d, "raw.txt"), "w") as f:
        f.write(base + ".tucker\n")
    lines = [
        f"Global dims = {' '.join(map(str, a.dims))}",
        f"Automatic rank determination = {'false' if ranks else 'true'}",
        "Perform STHOSVD = true",
        "Write STHOSVD result = true",
        "Write core tensor and factor matrices = true",
        f"STHOSVD directory = {d}",
        f"SV directory = {d}",
        f"Input file list = {d}/raw.txt",
        f"Stats file = {d}/stats.txt",
        f"Timing file = {d}/runtime.csv",
        "Scaling type = None",
    ]
    lines.append(f"Ranks = {' '.join(map(str, ranks))}" if ranks else f"SV Threshold = {tol!r}")
    if procs:
        lines.append(f"Grid dims = {' '.join(['1'] * (len(a.dims) - 1) + [str(procs)])}")
    with open(os.path.join(d, "paramfile.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    exe = os.path.join(a.tucker_dir, "mpi/drivers/bin/sthosvd" if procs else "serial/drivers/bin/Tucker_sthosvd")
    cmd = [exe, "--parameter-file", os.path.join(d, "paramfile.txt")]
    if procs:
        cmd = mpirun(procs) + cmd
    out, wall, rss = run(cmd, env, cwd=d, log=log)
    if procs:
        m = re.search(r"Total\s*:\s*(\S+)\s+(\S+)", out)  # min, max over the processes
        err = re.search(r"Error bound: (\S+)", out)
        seconds, rel = float(m.group(2)), float(err.group(1))
    else:
        m = re.search(r"STHOSVD time: (\S+)", out)
        err = re.search(r"Error bound: \S+, (\S+) / (\S+)", out)
        seconds, rel = float(m.group(1)), float(err.group(1)) / float(err.group(2))
    with open(os.path.join(d, "sthosvd_ranks.txt")) as f:
        got = [int(v) for v in f.read().split()]
    return {"seconds": seconds, "relative_error": rel, "ranks": got, "wall": wall,
            "rss_mib": rss}


# ---------------------------------------------------------------------------- report


def summarize(rows, key):
    vals = [r[key] for r in rows]
    return min(vals), statistics.median(vals)


def table(results, load):
    lines = []
    cp = [r for r in results if r["kind"] == "cp"]
    if cp:
        lines += ["| case | dtype | Tenfold s/it (min, median) | GenTen default s/it (min, median) | ratio | "
                  "GenTen phan s/it (min, median) | ratio | fit Tenfold / GenTen / GenTen phan "
                  "| peak RSS Tenfold / GenTen / GenTen phan |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in cp:
            t, g, h = r["tenfold"], r["peer"], r["peer_phan"]
            tm, tmed = summarize(t, "per_iteration")
            gm, gmed = summarize(g, "per_iteration")
            hm, hmed = summarize(h, "per_iteration")
            rss = " / ".join(f"{max(x['rss_mib'] for x in side):.0f}" for side in (t, g, h))
            lines.append(
                f"| {r['label']} | {r['dtype']} | {tm:.4g}, {tmed:.4g} | {gm:.4g}, {gmed:.4g} | {gmed / tmed:.2f}x "
                f"| {hm:.4g}, {hmed:.4g} | {hmed / tmed:.2f}x "
                f"| {t[0]['fit']:.6f} / {g[0]['fit']:.6f} / {h[0]['fit']:.6f} | {rss} MiB |")
        lines.append("")
    tk = [r for r in results if r["kind"] == "tucker"]
    if tk:
        lines += ["| case | processes | Tenfold s (min, median) | TuckerMPI s (min, median) | TuckerMPI / "
                  "Tenfold (median) | ranks T / P | rel. error Tenfold | rel. error TuckerMPI "
                  "| peak RSS Tenfold | peak RSS TuckerMPI |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in tk:
            t, p = r["tenfold"], r["peer"]
            tm, tmed = summarize(t, "seconds")
            pm, pmed = summarize(p, "seconds")
            lines.append(
                f"| {r['label']} | {r['procs'] or 'no MPI'} | {tm:.4g}, {tmed:.4g} | {pm:.4g}, {pmed:.4g} "
                f"| {pmed / tmed:.2f}x | {'x'.join(map(str, t[0]['ranks']))} / "
                f"{'x'.join(map(str, p[0]['ranks']))} | {t[0]['relative_error']:.6g} "
                f"| {p[0]['relative_error']:.6g} | {max(x['rss_mib'] for x in t):.0f} MiB "
                f"| {max(x['rss_mib'] for x in p):.0f} MiB |")
        lines.append("")
    lines.append(f"Load average: {load}")
    return "\n".join(lines) + "\n"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---------------------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for results.json and results.md")
    p.add_argument("--quick", action="store_true", help="1 repetition, 5 CP sweeps")
    p.add_argument("--reps", type=int, help="repetitions (default 3, quick 1)")
    p.add_argument("--iters", type=int, help="CP sweeps per run (default 20, quick 5)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mpi", default="1,2", help="process counts for the MPI Tucker rows ('' for none)")
    p.add_argument("--only", choices=["cp", "tucker"], help="run one kind of case")
    p.add_argument("--data", default="/tmp/peers-data")
    p.add_argument("--prepare", action="store_true", help="only write the tensors and starts")
    p.add_argument("--peer-wait-policy", choices=["passive"],
                   help="OMP_WAIT_POLICY for the peers' processes only (their OpenMP threads, "
                        "and Debian's OpenMP OpenBLAS's, spin while idle by default)")
    p.add_argument("--tenfold", default=os.path.join(ROOT, "build/release/tools/tenfold"))
    p.add_argument("--dtypes", default="float64",
                   help="comma-separated precisions of the CP rows: float64, float32")
    p.add_argument("--genten", default=os.path.join(ROOT, "build/peers/genten-double/bin/genten"))
    p.add_argument("--genten-float", default=os.path.join(ROOT, "build/peers/genten-float/bin/genten"),
                   help="GenTen built with FLOAT_TYPE=float, for the float32 rows")
    p.add_argument("--tucker-dir", default=os.path.join(ROOT, "build/peers/tuckermpi"))
    a = p.parse_args()
    reps = a.reps or (1 if a.quick else 3)
    iters = a.iters or (5 if a.quick else 20)
    procs_list = [int(v) for v in a.mpi.split(",") if v]
    dtypes = [v for v in a.dtypes.split(",") if v]
    if not dtypes or any(v not in ("float64", "float32") for v in dtypes):
        p.error(f"--dtypes: expected float64 and/or float32, got {a.dtypes!r}")
    needed = [a.tenfold] + ([genten_for(a, v) for v in dtypes] if a.only in (None, "cp") else []) + (
        [os.path.join(a.tucker_dir, "serial/drivers/bin/Tucker_sthosvd")] if a.only in (None, "tucker") else [])
    for exe in [] if a.prepare else needed:
        if not os.access(exe, os.X_OK):
            sys.exit(f"run.py: {exe} is missing; build it first (bench/peers/README.md)")
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.data, exist_ok=True)
    work = fresh_dir(os.path.join(a.data, "work"))
    log = os.path.join(a.out, "log.txt")
    open(log, "w").close()

    cases = []
    if a.only in (None, "cp"):
        for dtype in dtypes:
            for dims, rank in [((200, 200, 200), 64), ((400, 400, 400), 32), ((50, 50, 50, 50), 10)]:
                cases.append({"kind": "cp", "dims": dims, "rank": rank, "dtype": dtype,
                              "label": f"CP {shape_label(dims)} R{rank}"})
    if a.only in (None, "tucker"):
        for dims, planted, ranks, tol in [((300, 300, 300), (30, 30, 30), (30, 30, 30), None),
                                          ((600, 600, 600), (40, 40, 40), None, 0.05)]:
            sel = f"ranks {ranks[0]}" if ranks else f"tol {tol:g}"
            for procs in [0] + procs_list:
                cases.append({"kind": "tucker", "dims": dims, "planted": planted, "ranks": ranks,
                              "tol": tol, "procs": procs,
                              "label": f"ST-HOSVD {shape_label(dims)} {sel}"})

    for c in cases:
        name = f"{c['kind']}_{'x'.join(map(str, c['dims']))}"
        if c["kind"] == "cp":
            name += f"_r{c['rank']}"
            c["base"] = ensure_tensor(a.data, name, lambda c=c: planted_cp(c["dims"], c["rank"], 0.01, 1), "genten")
            if c["dtype"] == "float32":
                float32_copy(c["base"])
            c["start"], c["gstart"] = write_start(a.data, name, c["dims"], c["rank"], 2)
        else:
            name += f"_t{c['planted'][0]}"
            c["base"] = ensure_tensor(a.data, name, lambda c=c: planted_tucker(c["dims"], c["planted"], 0.01, 1), "tucker")
        c["tenfold"], c["peer"] = [], []
        if c["kind"] == "cp":
            c["peer_phan"] = []
    if a.prepare:
        return

    loads = [loadavg()]
    for rep in range(reps):
        for c in cases:
            a.dims = c["dims"]
            threads = max(1, a.threads // c["procs"]) if c.get("procs") else a.threads
            env, penv = env_with(threads), env_with(threads, a.peer_wait_policy)
            if c["kind"] == "cp":
                dt = c["dtype"]
                sides = [("tenfold", lambda: tenfold_cp(a, c["base"], c["start"], c["rank"], iters, work, env, log, dt)),
                         ("peer", lambda: genten_cp(a, c["base"], c["gstart"], c["rank"], iters, work, penv, log, dt)),
                         ("peer_phan", lambda: genten_cp(a, c["base"], c["gstart"], c["rank"], iters, work, penv, log,
                                                         dt, "phan"))]
            else:
                sides = [("tenfold", lambda: tenfold_tucker(a, c["base"], c["ranks"], c["tol"], c["procs"], work, env, log)),
                         ("peer", lambda: tucker_peer(a, c["base"], c["ranks"], c["tol"], c["procs"], work, penv, log))]
            if rep % 2:
                sides.reverse()
            for side, fn in sides:
                r = fn()
                c[side].append(r)
                print(f"rep {rep} {c['label']} {c.get('dtype', 'float64')} procs={c.get('procs', 0)} {side}: "
                      + json.dumps({k: v for k, v in r.items() if k != "phases"}), flush=True)
            loads.append(loadavg())

    results = [{k: v for k, v in c.items() if k not in ("base", "start", "gstart")} for c in cases]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "machine": platform.processor()
            or platform.machine(), "cpus": os.cpu_count(), "threads": a.threads, "reps": reps,
            "cp_iterations": iters, "load_averages": loads, "peer_wait_policy": a.peer_wait_policy,
            "versions": {n: versions_of(v) for n, v in [
                ("genten", os.path.join(os.path.dirname(os.path.dirname(a.genten)), "versions.txt")),
                ("genten_float", os.path.join(os.path.dirname(os.path.dirname(a.genten_float)), "versions.txt")),
                ("tuckermpi", os.path.join(a.tucker_dir, "versions.txt"))] if os.path.exists(v)}}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    md = table(results, f"{loads[0]} at the start, {loads[-1]} at the end (1, 5, 15 min)")
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
