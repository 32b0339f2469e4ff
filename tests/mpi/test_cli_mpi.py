"""The tenfold program under mpirun writes the same files as the serial program.

Usage: test_cli_mpi.py TENFOLD MPIEXEC. For C- and Fortran-order inputs, `tenfold
tucker` (ST-HOSVD by --tol, HOOI by --ranks) and `tenfold cp` run once serially and
under mpirun with 2, 3 and 4 processes; every .npy output must match to 1e-12
relative (float64), the reports must agree on everything but timings and the MPI
section, and that section must name the processes. A missing input gives an error
on every process, a non-zero exit and no output folder.
"""
import json
import os
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


def main():
    rng = np.random.default_rng(0)
    shape = (12, 10, 9, 7)
    factors = [rng.standard_normal((n, 3)) for n in shape]
    x = np.einsum("ir,jr,kr,lr->ijkl", *factors) + 0.01 * rng.standard_normal(shape)
    with tempfile.TemporaryDirectory() as tmp:
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
        # A missing input: every process says so, nothing is written.
        out = os.path.join(tmp, "absent_out")
        p = run(["cp", os.path.join(tmp, "absent.npy"), "--rank", "2", "--out", out], 3,
                expect_ok=False)
        assert p.returncode != 0
        assert not os.path.exists(out)
        assert p.stderr.count("absent.npy") >= 3, p.stderr
    print("ok")


main()
