"""tenfold.parafac from Python against the program (the compare driver) on the same tensor.

    python bench/compare/python_vs_program.py DRIVER [--size 200] [--rank 64] [--iters 40]
        [--rounds 6] [--dtypes float64,float32]

Run it with an interpreter that imports the `tenfold` package built from the same sources
as DRIVER (bench/tenfold_compare_driver) and NumPy. Both sides run plain ALS
(compress off, tol 0) from the same start on ab.py's planted tensor for `iters` sweeps;
the time a sweep is the library's own total (`timings["total"]` in Python, the driver's
seconds_total), so neither the loading nor the binding's call is in it. Python gets the
tensor as NumPy holds it in Fortran order (the modes swept in the program's order) and in
C order (NumPy's default: the library reads it in place as the reversed tensor and sweeps
the modes backwards). Each round runs the three one after the other, the order alternating
with the round; the figure to quote is the median over rounds of each Python time over the
program's time of the same round.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile

import numpy as np
import tenfold

from ab import write_case


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("driver")
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rank", type=int, default=64)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--dtypes", default="float64,float32")
    a = p.parse_args()
    print(f"tenfold from {os.path.dirname(tenfold.__file__)}; load average at the start: "
          f"{os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="tenfold-pvp-") as folder:
        for dtype in a.dtypes.split(","):
            tensor, starts = write_case(folder, a.size, a.rank, dtype)
            x_f = np.load(tensor)
            x_c = np.ascontiguousarray(x_f)  # the same tensor, NumPy's default layout
            start = [np.load(s) for s in starts.split(",")]

            def program():
                out = subprocess.run([a.driver, "cp", "--tensor", tensor, "--init", starts,
                                      "--iters", str(a.iters), "--dtype", dtype],
                                     capture_output=True, text=True, check=True).stdout
                return json.loads(out)["seconds_total"] / a.iters

            def python(x):
                r = tenfold.parafac(x, a.rank, init=(None, start), n_iter_max=a.iters, tol=0,
                                    compress="off")
                return r.timings["total"] / a.iters

            runs = {"program": program, "Python, Fortran order": lambda: python(x_f),
                    "Python, C order": lambda: python(x_c)}
            times = {name: [] for name in runs}
            for r in range(a.rounds):
                for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                    times[name].append(runs[name]())
            print(f"{a.size}^3 R{a.rank} {dtype}: program median "
                  f"{statistics.median(times['program']) * 1e3:.2f} ms a sweep")
            for name in list(runs)[1:]:
                ratios = [t / q for t, q in zip(times[name], times["program"])]
                print(f"  {name} / program: median {statistics.median(ratios):.3f} (each "
                      f"{' '.join(f'{v:.3f}' for v in ratios)}); median "
                      f"{statistics.median(times[name]) * 1e3:.2f} ms a sweep")
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
