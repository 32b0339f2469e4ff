"""Plots calibration.json files of calibration_eval.py: mean embedding cosine against
the damping, per R and evaluation set, data-aware (token weights) against weight-only.

    python plot_calibration.py OUT.png RESULTS.json [RESULTS.json ...]
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out, inputs = sys.argv[1], sys.argv[2:]
    rows = [e for path in inputs for e in json.loads(open(path).read())]
    sets = list(rows[0]["sets"])
    ranks = sorted({e["rank"] for e in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(sets), figsize=(4.2 * len(sets), 3.6), sharey=True)
    for ax, name in zip(axes, sets):
        for rank, colour in zip(ranks, ("tab:blue", "tab:orange", "tab:green", "tab:red")):
            data = sorted({(e["damping"], e["sets"][name]["cosine_mean"]) for e in rows
                           if e["rank"] == rank and e["calibration_sentences"] == 256
                           and e.get("weighting", "token") == "token"})
            ax.plot([d for d, _ in data], [c for _, c in data], "o-", color=colour,
                    label=f"data-aware, R = {rank}")
            weight = [e["sets"][name]["cosine_mean"] for e in rows
                      if e["rank"] == rank and e["calibration_sentences"] is None]
            if weight:
                ax.axhline(weight[0], color=colour, linestyle="--",
                           label=f"weight-only, R = {rank}")
        ax.set_xscale("log")
        ax.set_xlabel("damping λ")
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("mean embedding cosine")
    axes[0].legend(fontsize=8)
    fig.suptitle("all-MiniLM-L6-v2, 256 prose calibration sentences")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
