"""Bar chart of bench/peers/run.py's results: the peer's time over Tenfold's (median
over the repetitions; above 1: Tenfold is faster), one bar per case and peer.

    python bench/peers/plot.py OUT.png RESULTS.json [RESULTS.json ...]
"""

import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: plot.py OUT.png RESULTS.json [RESULTS.json ...]")
    runs = []
    for path in sys.argv[2:]:
        with open(path) as f:
            runs.append(json.load(f))
    labels, ratios, colors = [], [], []
    for r in [r for data in runs for r in data["results"]]:
        key = "per_iteration" if r["kind"] == "cp" else "seconds"
        ours = statistics.median(x[key] for x in r["tenfold"])
        if r["kind"] == "cp":
            peers = [("peer", "GenTen default", "tab:blue"), ("peer_phan", "GenTen phan", "tab:cyan")]
        else:
            where = f"MPI {r['procs']}p" if r["procs"] else "on-node"
            peers = [("peer", f"TuckerMPI, {where}", "tab:orange")]
        for side, name, color in peers:
            labels.append(f"{r['label']}\nvs {name}")
            colors.append(color)
            ratios.append(statistics.median(x[key] for x in r[side]) / ours)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels)), 4.5))
    ax.bar(range(len(ratios)), ratios, color=colors)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("peer time / Tenfold time (median)")
    meta = runs[0]["meta"]
    loads = ", ".join(data["meta"]["load_averages"][0].split()[0] for data in runs)
    ax.set_title(f"{meta['threads']} threads, {meta['reps']} repetition(s); load average {loads}",
                 fontsize=9)
    for i, v in enumerate(ratios):
        ax.text(i, v, f"{v:.2g}x", ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=110)


if __name__ == "__main__":
    main()
