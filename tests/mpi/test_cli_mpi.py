"""The tenfold program under mpirun writes the same files as the serial program.

Usage: test_cli_mpi.py TENFOLD MPIEXEC. For C- and Fortran-order inputs, `tenfold
tucker` (ST-HOSVD by --tol, HOOI by --ranks) and `tenfold cp` run once serially and
under mpirun with 2, 3 and 4 processes; every .npy output must match to 1e-12
relative (float64), the reports must agree on everything but timings and the MPI
section, and that section must name the processes. --grid sets the process grid per
NumPy axis (C- and Fortran-order inputs alike); a grid that does not fit the process
count or the input, and a missing input, give an error on every process, a non-zero
exit and no output folder. So do processes that see different inputs or arguments: a
process whose working folder holds no input, a truncated one or a float32 copy, and an
MPMD command line whose programs differ in an argument (each must end, not hang: the
runs have a time limit); `--grid ""` is refused with and without mpirun. Sparse inputs
(.tns with comments and CRLF lines, .tfsparse): `tenfold cp` under mpirun writes the
serial program's files, on a chosen grid and on one given by --grid; a bad line names its
line on every process, and the solvers and flags not available under mpirun are refused.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

TENFOLD, MPIEXEC = sys.argv[1], sys.argv[2]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
# Keys that depend on the run, not on the result.
VOLATILE = {"seconds", "timings", "mpi", "input"}


def run(args, processes=None, expect_ok=True):
    cmd = [TENFOLD] + args + ["-q"]
    if processes is not None:
        cmd = [MPIEXEC, "--oversubscribe", "-np", str(processes)] + cmd
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=60)
    if expect_ok and p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p


def close(got, want, key):
    """Numbers, objects compared field by field, or (nested) lists compared list by
    list as the arrays are: the largest difference relative to the largest magnitude,
    at least 1 (eigenvalues are accurate
    to about eps times the largest one; fits and relative errors, numbers of order one
    from a difference of squared norms, to about eps in absolute terms)."""
    if isinstance(want, dict):
        assert got.keys() == want.keys(), key
        for k in want:
            close(got[k], want[k], f"{key}.{k}")
        return
    if isinstance(want, list) and want and isinstance(want[0], list):
        assert len(got) == len(want), key
        for g, w in zip(got, want):
            close(g, w, key)
        return
    g, w = np.atleast_1d(np.array(got, dtype=float)), np.atleast_1d(np.array(want, dtype=float))
    assert g.shape == w.shape, (key, g.shape, w.shape)
    if w.size:
        scale = max(np.abs(w).max(), 1.0)
        assert np.abs(g - w).max() <= 1e-12 * scale, (key, got, want)


def refused(args, processes, message):
    """Every process prints `message` on one line; non-zero exit, no output folder."""
    out = os.path.join(os.path.dirname(args[1]), "refused_out")
    p = run(args + ["--out", out], processes, expect_ok=False)
    assert p.returncode != 0, args
    assert not os.path.exists(out), args
    lines = [line for line in p.stderr.splitlines() if message in line]
    assert len(lines) == (processes or 1), (message, p.stderr)


def per_process(args, folders, tmp, message):
    """`mpirun -np 1 -wdir F0 tenfold ARGS0 : -np 1 -wdir F1 tenfold ARGS1 ...` (args:
    one list per process, or one for all): every process prints `message` on one line,
    the exit is non-zero and no output folder appears."""
    out = os.path.join(tmp, "per_process_out")
    cmd = [MPIEXEC, "--oversubscribe"]
    for i, folder in enumerate(folders):
        own = args[i] if isinstance(args[0], list) else args
        cmd += ([":"] if i else []) + ["-np", "1", "-wdir", folder, os.path.abspath(TENFOLD)]
        cmd += own
        cmd += ["--out", out, "-q"]
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, (cmd, p.stderr)
    assert not os.path.exists(out), cmd
    errors = [line for line in p.stderr.splitlines() if "error:" in line]
    assert len(errors) == len(folders), (cmd, p.stderr)
    assert all(message in line for line in errors), (message, p.stderr)


def compare(serial, dist, processes):
    names = sorted(f for f in os.listdir(serial) if f.endswith(".npy"))
    assert names == sorted(f for f in os.listdir(dist) if f.endswith(".npy")), (serial, dist)
    for name in names:
        a, b = np.load(os.path.join(serial, name)), np.load(os.path.join(dist, name))
        assert a.shape == b.shape and a.dtype == b.dtype, (name, a.shape, b.shape)
        assert a.flags["C_CONTIGUOUS"] == b.flags["C_CONTIGUOUS"], name
        rel = np.abs(a - b).max() / np.abs(a).max()
        assert rel < 1e-12, f"{dist}/{name}: relative difference {rel:.3g}"
    rs = json.load(open(os.path.join(serial, "report.json")))
    rd = json.load(open(os.path.join(dist, "report.json")))
    for key in rs.keys() - VOLATILE:
        vs, vd = rs[key], rd[key]
        if isinstance(vs, (float, list, dict)):
            close(vd, vs, key)
        else:
            assert vs == vd, (key, vs, vd)
    assert rd["mpi"]["processes"] == processes, rd["mpi"]
    assert int(np.prod(rd["mpi"]["grid"])) == processes, rd["mpi"]


def save_tfsparse(path, dims, coords, values):
    """The binary sparse format (docs/sparse.md): header, sizes, indices mode-major, values."""
    with open(path, "wb") as f:
        f.write(b"TFSPARSE" + struct.pack("<IIIIq", 1, len(dims), 8, 0, len(values)))
        f.write(np.asarray(dims, dtype="<i8").tobytes())
        f.write(np.ascontiguousarray(coords, dtype="<i8").tobytes())
        f.write(np.asarray(values, dtype="<f8").tobytes())


def sparse(tmp):
    rng = np.random.default_rng(1)
    dims = (30, 20, 16)
    nnz = 1500
    # Power-law indices (many entries in the first slices), odd slices of axis 0 empty.
    coords = np.stack([np.minimum((n ** rng.random(nnz)).astype(int) - 1, n - 1) for n in dims])
    coords[0] -= coords[0] % 2
    values = rng.standard_normal(nnz)
    tns = os.path.join(tmp, "s.tns")
    with open(tns, "w", newline="") as f:
        f.write("# shape: 30 20 16\n# a comment\n\n")
        for k in range(nnz):
            end = "\r\n" if k % 3 else "\n"
            f.write(" ".join(str(i + 1) for i in coords[:, k]) + f" {float(values[k])!r}{end}")
    binary = os.path.join(tmp, "s.tfsparse")
    save_tfsparse(binary, dims, coords, values)
    args = ["--rank", "3", "--seed", "4", "--n-starts", "1", "--max-iters", "30"]
    for name, path in (("tns", tns), ("tfsparse", binary)):
        serial = os.path.join(tmp, f"sparse_{name}_serial")
        run(["cp", path] + args + ["--out", serial])
        for p in (2, 3, 4):
            dist = os.path.join(tmp, f"sparse_{name}_np{p}")
            run(["cp", path] + args + ["--out", dist], processes=p)
            compare(serial, dist, p)
        dist = os.path.join(tmp, f"sparse_{name}_grid")
        run(["cp", path] + args + ["--out", dist, "--grid", "1x2x2"], processes=4)
        compare(serial, dist, 4)
        assert json.load(open(os.path.join(dist, "report.json")))["mpi"]["grid"] == [1, 2, 2]
    bad = os.path.join(tmp, "bad.tns")
    with open(tns) as f, open(bad, "w") as g:
        g.write(f.read() + "1 2 17 1.0\n")
    refused(["cp", bad, "--rank", "2"], 3,
            f"line {nnz + 4}: column 3: index 17 exceeds the size 16 of mode 2")
    refused(["cp", tns, "--rank", "2", "--grid", "1x1x4"], 3,
            "tenfold cp: error: --grid 1x1x4 has 4 processes, but mpirun started 3")
    refused(["cp", tns, "--rank", "2", "--time-limit", "5"], 2,
            "tenfold cp: error: --time-limit is not available under mpirun")
    refused(["cp-apr", tns, "--rank", "2"], 2, "cp-apr does not run under mpirun")
    refused(["gcp", tns, "--rank", "2"], 2, "gcp does not run under mpirun")
    refused(["cp", tns, "--rank", "2", "--solver", "sampled"], 2,
            "--solver sampled applies to dense .npy inputs only")


def main():
    rng = np.random.default_rng(0)
    shape = (12, 10, 9, 7)
    factors = [rng.standard_normal((n, 3)) for n in shape]
    x = np.einsum("ir,jr,kr,lr->ijkl", *factors) + 0.01 * rng.standard_normal(shape)
    with tempfile.TemporaryDirectory() as tmp:
        sparse(tmp)
        inputs = {"c": os.path.join(tmp, "x_c.npy"), "f": os.path.join(tmp, "x_f.npy")}
        np.save(inputs["c"], x)
        np.save(inputs["f"], np.asfortranarray(x))
        jobs = {
            "sthosvd": ["tucker", "--tol", "1e-2"],
            "hooi": ["tucker", "--ranks", "3,3,3,3", "--method", "hooi", "--max-iters", "3"],
            "cp": ["cp", "--rank", "3", "--seed", "4"],
        }
        for order, path in inputs.items():
            for job, args in jobs.items():
                serial = os.path.join(tmp, f"{job}_{order}_serial")
                run(args[:1] + [path] + args[1:] + ["--out", serial])
                for p in (2, 3, 4):
                    dist = os.path.join(tmp, f"{job}_{order}_np{p}")
                    run(args[:1] + [path] + args[1:] + ["--out", dist], processes=p)
                    compare(serial, dist, p)
        # --grid per NumPy axis, whatever the file's order.
        for order, path in inputs.items():
            for job, grid in (("sthosvd", [1, 2, 2, 1]), ("cp", [2, 1, 1, 2])):
                args = jobs[job]
                serial = os.path.join(tmp, f"{job}_{order}_serial")
                dist = os.path.join(tmp, f"{job}_{order}_grid")
                text = "x".join(map(str, grid))
                run(args[:1] + [path] + args[1:] + ["--out", dist, "--grid", text], processes=4)
                compare(serial, dist, 4)
                got = json.load(open(os.path.join(dist, "report.json")))["mpi"]["grid"]
                assert got == grid, (got, grid)
        path = inputs["c"]
        refused(["cp", path, "--rank", "2", "--grid", "1x1x1x4"], 3,
                "tenfold cp: error: --grid 1x1x1x4 has 4 processes, but mpirun started 3")
        refused(["tucker", path, "--tol", "0.1", "--grid", "3x1"], 3,
                "tenfold tucker: error: --grid 3x1 has 2 entries, but the input has 4 axes")
        refused(["tucker", path, "--tol", "0.1", "--grid", "1x1x1x8"], 8,
                "--grid 1x1x1x8: NumPy axis 3 has 7 indices for 8 processes")
        refused(["cp", path, "--rank", "2", "--grid", "2x-1x1x1"], 2, "is not of the form P0xP1x")
        refused(["cp", path, "--rank", "2", "--solver", "sampled"], 2,
                "tenfold cp: error: --solver sampled is not available under mpirun")
        refused(["cp", path, "--rank", "2", "--grid", "1x2x1x1"], None,
                "--grid 1x2x1x1 has 2 processes, but this run has one (start it with mpirun")
        # A missing input: every process says so, nothing is written.
        out = os.path.join(tmp, "absent_out")
        p = run(["cp", os.path.join(tmp, "absent.npy"), "--rank", "2", "--out", out], 3,
                expect_ok=False)
        assert p.returncode != 0
        assert not os.path.exists(out)
        assert p.stderr.count("absent.npy") >= 3, p.stderr
        refused(["cp", path, "--rank", "2", "--grid", ""], 2, "--grid: empty value")
        refused(["tucker", path, "--tol", "0.1", "--grid", ""], None, "--grid: empty value")
        # Inputs that differ between processes: the same relative name in each process's
        # working folder (the last one's differs), the same command line.
        good, bad = os.path.join(tmp, "good"), os.path.join(tmp, "bad")
        os.makedirs(good)
        os.makedirs(bad)
        np.save(os.path.join(good, "x.npy"), x)
        folders = [good, good, bad]
        for job in ("cp", "sthosvd"):
            args = jobs[job][:1] + ["x.npy"] + jobs[job][1:]
            per_process(args, folders, tmp, "process 2: 'x.npy': cannot open")
            with open(os.path.join(good, "x.npy"), "rb") as f:
                head = f.read(1000)
            with open(os.path.join(bad, "x.npy"), "wb") as f:
                f.write(head)
            per_process(args, folders, tmp, "process 2: 'x.npy': shape (12, 10, 9, 7) of dtype")
            np.save(os.path.join(bad, "x.npy"), x.astype(np.float32))
            per_process(args, folders, tmp,
                        "process 2: the headers of 'x.npy' differ between processes: dtype is "
                        "float32 here, float64 on process 0")
            os.remove(os.path.join(bad, "x.npy"))
        # MPMD: the programs differ in one argument.
        path = os.path.join(good, "x.npy")
        per_process([["cp", path, "--rank", "2"], ["cp", path, "--rank", "3"]], [tmp, tmp], tmp,
                    "process 1: the command lines differ between processes: argument 4 is '3' "
                    "here, '2' on process 0")
        per_process([["cp", path, "--rank", "2"], ["tucker", path, "--tol", "0.1"]], [tmp, tmp],
                    tmp, "process 1: the command lines differ between processes: argument 1 is "
                    "'tucker' here, 'cp' on process 0")
    print("ok")


main()
