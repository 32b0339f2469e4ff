"""Plots the results of run.py: perplexity and decode work against the key cache, one
line per method (data-aware solid, weight-only dashed)."""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METHODS = [("rotary", 1, "shared rotary keys (tenfold)", "C0"),
           ("rotary", 4, "shared keys, bands of 4 (tenfold)", "C1"),
           ("rotary", 8, "shared keys, bands of 8 (tenfold)", "C4"),
           ("svd", 0, "whitened SVD of keys (Palu/SVD-LLM)", "C3"),
           ("partial", 0, "partial RoPE (MHA2MLA), no fine-tune", "C2")]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results")
    ap.add_argument("png")
    args = ap.parse_args()
    with open(args.results) as f:
        res = json.load(f)
    rows, layers = res["rows"], res["layers"]
    base = next(r for r in rows if r["method"] == "original")
    kb = lambda r: r["key_values"] * 2 * layers / 1024  # noqa: E731  fp16 key-cache KiB per token
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for method, bands, label, colour in METHODS:
        for data, style in ((True, "-"), (False, "--")):
            pts = sorted((kb(r), r["ppl"], r["flops"]) for r in rows
                         if r["method"] == method and r.get("bands", 0 if method != "rotary" else 1) == bands
                         and r["data"] == data)
            if not pts:
                continue
            name = f"{label}, {'data-aware' if data else 'weight-only'}"
            # Both decompositions are exact at the full cache; partial RoPE is not (it drops rotations).
            end = [(kb(base), base["ppl"], base["flops"])] if method != "partial" else []
            left.plot([p[0] for p in pts + end], [p[1] for p in pts + end], style, color=colour, marker="o",
                      label=name)
            if data:
                right.plot([p[0] for p in pts], [p[2] / 1e6 for p in pts], "-", color=colour, marker="o", label=label)
    left.axhline(base["ppl"], color="k", lw=0.8, label=f"original ({base['ppl']:.1f})")
    left.set_yscale("log")
    left.set_xlabel("key cache per token, fp16 (KiB, all 30 layers)")
    left.set_ylabel(f"perplexity, {res['heldout_tokens']} held-out tokens")
    left.legend(fontsize=7)
    right.axhline(base["flops"] / 1e6, color="k", lw=0.8, label="original")
    right.set_yscale("log")
    right.set_xlabel("key cache per token, fp16 (KiB, all 30 layers)")
    right.set_ylabel("score MFLOP per new token and layer (2,048 cached)")
    right.legend(fontsize=7)
    fig.suptitle("SmolLM2-135M-Instruct, key-cache compression without fine-tuning")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
