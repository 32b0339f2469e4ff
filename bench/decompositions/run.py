"""TensorLy's decompositions beyond CP and Tucker, Tenfold against TensorLy (NumPy backend),
same data and start, one process: PARAFAC2 and coupled matrix-tensor factorization
(parafac2_cmtf.py), tensor train and non-negative Tucker (tt_nntucker.py).

    python bench/decompositions/run.py --out runs/decompositions [--quick]

Writes results.json (every row of both scripts, the load average, the versions) and
prints one table: seconds per iteration (per call for tensor train) of each library,
their ratio, and both final relative errors. The table in docs/performance.md
("Decompositions") comes from this command.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorly  # noqa: E402

import tenfold  # noqa: E402
import parafac2_cmtf  # noqa: E402
import tt_nntucker  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for results.json (created)")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    load = os.getloadavg()
    rows = parafac2_cmtf.run(args.quick) + tt_nntucker.run(args.quick)
    result = {"quick": args.quick, "tensorly": tensorly.__version__, "tenfold": tenfold.__version__,
              "numpy": np.__version__, "cpus": os.cpu_count(), "load_before": load,
              "load_after": os.getloadavg(), "rows": rows}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"tensorly {tensorly.__version__}, tenfold {tenfold.__version__}, {os.cpu_count()} CPUs, "
          f"load {load[0]:.1f} -> {result['load_after'][0]:.1f}")
    print(f"{'case':<44}{'TensorLy s':>12}{'Tenfold s':>11}{'ratio':>8}{'TensorLy err':>14}{'Tenfold err':>13}")
    for r in rows:
        print(f"{r['case']:<44}{r['tensorly_s']:>12.4f}{r['tenfold_s']:>11.4f}{r['ratio']:>8.1f}"
              f"{r['tensorly_error']:>14.6g}{r['tenfold_error']:>13.6g}")


if __name__ == "__main__":
    main()
