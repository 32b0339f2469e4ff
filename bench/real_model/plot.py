"""Plots results.json of run.py: the energy curves of P, W_Q and W_K per layer, and the
embedding cosine similarity and QK error against the shared dimension R per method."""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CURVES = {"products": "P", "queries": "W_Q", "keys": "W_K"}
METHODS = [("tenfold", "tenfold", "C0", "o"), ("tensorly", "TensorLy parafac", "C3", "s")]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results")
    ap.add_argument("png")
    args = ap.parse_args()
    with open(args.results) as f:
        results = json.load(f)

    fig, axes = plt.subplots(2, 3, figsize=(15, 9))
    layers = results["analyze"]["layers"]
    colours = plt.cm.viridis([i / max(1, len(layers) - 1) for i in range(len(layers))])
    for ax, (key, name) in zip(axes[0], CURVES.items()):
        for layer, entry in enumerate(layers):
            curve = entry[key]["cumulative"]
            ax.plot(range(1, len(curve) + 1), curve, color=colours[layer], label=f"layer {layer}")
        for t in (0.9, 0.95, 0.99):
            ax.axhline(t, color="grey", lw=0.5, ls=":")
        ax.set_title(f"cumulative energy of {name}")
        ax.set_xlabel("dimensions")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="lower right")

    ax_cos, ax_gap, ax_err = axes[1]
    for key, label, colour, marker in METHODS:
        entries = sorted((e for e in results[key] if not e.get("label")),
                         key=lambda e: e["rank"])
        if not entries:
            continue
        ranks = [e["rank"] for e in entries]
        ax_cos.plot(ranks, [e["cosine_mean"] for e in entries], color=colour, marker=marker,
                    label=f"{label}, mean")
        ax_cos.plot(ranks, [e["cosine_min"] for e in entries], color=colour, marker=marker,
                    ls="--", label=f"{label}, min")
        ax_gap.semilogy(ranks, [max(1 - e["cosine_mean"], 1e-16) for e in entries],
                        color=colour, marker=marker, label=label)
        for layer in range(len(entries[0]["qk_relative_error"])):
            ax_err.plot(ranks, [e["qk_relative_error"][layer] for e in entries], color=colour,
                        marker=marker, alpha=0.4 + 0.1 * layer,
                        label=label if layer == 0 else None)
    for key, label, style in (("qk_error_floor", "floor under any CP model", ":"),
                              ("qk_error_per_head", "best model without sharing", "--")):
        ranks = sorted(int(r) for r in results[key])
        means = [sum(results[key][str(r)]) / len(results[key][str(r)]) for r in ranks]
        ax_err.plot(ranks, means, color="black", ls=style, label=f"{label} (layer mean)")
    ax_cos.set_title("embedding cosine similarity to the original")
    ax_gap.set_title("1 - mean cosine similarity")
    ax_err.set_title("QK relative error per layer")
    for ax in axes[1]:
        ax.set_xlabel("shared dimension R")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"all-MiniLM-L6-v2, {results['sentences']} sentences")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
