"""Data-aware against weight-only compression of all-MiniLM-L6-v2 (docs/real-model.md,
"Data-aware compression").

Writes the calibration statistics of a sentence file (calibrate.py), runs
`tenfold attention compress` at each R without and with --calibration (one run per
damping), and measures each model with the float64 NumPy encoder against the original
on held-out evaluation sets: mean and minimum cosine of the sentence embeddings, the
share of nearest neighbours (within the set) unchanged, and the mean total-variation
distance of the attention probabilities. Writes calibration.json and calibration.md
to --out.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

import bertnp
import calibrate
import minilm
import run

HERE = Path(__file__).resolve().parent
SETS = {
    "prose (held out)": HERE / "calibration" / "prose_heldout.txt",
    "chat": HERE / "calibration" / "chat_heldout.txt",
    "sentences.txt": HERE / "sentences.txt",
}


def measure(tensors, tokens, reference):
    emb, probs = minilm.embed(minilm.encoder(tensors), tokens)
    emb0, probs0 = reference
    cosine = np.sum(emb0 * emb, axis=1)
    tv = np.concatenate([(0.5 * np.abs(a - b).sum(axis=-1)).ravel()
                         for p0, p1 in zip(probs0, probs) for a, b in zip(p0, p1)])
    return {"cosine_mean": float(cosine.mean()), "cosine_min": float(cosine.min()),
            "nn_agreement": float(np.mean(run.nearest_neighbours(emb0)
                                          == run.nearest_neighbours(emb))),
            "tv_mean": float(tv.mean())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenfold", required=True, help="the tenfold program")
    ap.add_argument("--out", default="out/real_model")
    ap.add_argument("--calibration", default=str(HERE / "calibration" / "prose_calibration.txt"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[256],
                    help="numbers of calibration sentences (the first N of the file)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[192, 128])
    ap.add_argument("--dampings", type=float, nargs="+", default=[1e-3, 1e-2, 1e-1])
    ap.add_argument("--weightings", nargs="+", default=["token"], choices=["token", "sentence"],
                    help="token: the mean of x xᵀ over tokens; sentence: every sentence alike")
    ap.add_argument("--no-weight-only", action="store_true", help="skip the weight-only runs")
    ap.add_argument("--sequential", action="store_true",
                    help="also sequential calibration: layer l's moment taken from the model "
                         "whose layers < l are already compressed (per R and damping)")
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    model = minilm.checkpoint()
    cfg = minilm.config()
    heads = cfg["num_attention_heads"]
    original, _ = bertnp.read_safetensors(model)
    sets = {}
    for name, path in SETS.items():
        tokens = minilm.tokenize(calibrate.read_sentences(path))
        sets[name] = (tokens, minilm.embed(minilm.encoder(original), tokens))

    stats = {}
    for size in args.sizes:
        texts = calibrate.read_sentences(args.calibration, size)
        for weighting in args.weightings:
            path = out_dir / f"calibration_{size}_{weighting}.safetensors"
            tensors, meta = calibrate.statistics(
                original, heads, cfg["layer_norm_eps"], minilm.tokenize(texts),
                f"{Path(args.calibration).name}, first {len(texts)} sentences, "
                f"{weighting} weights", weighting == "sentence")
            bertnp.write_safetensors(path, tensors, meta)
            stats[size, weighting] = path

    if args.sequential:
        texts = calibrate.read_sentences(args.calibration, max(args.sizes))
        tokens = minilm.tokenize(texts)
        for rank in args.ranks:
            for damping in args.dampings:
                path = out_dir / f"calibration_{len(texts)}_sequential_R{rank}_d{damping:g}.safetensors"
                tensors, meta = sequential_statistics(
                    args.tenfold, model, original, heads, cfg["layer_norm_eps"], tokens, rank,
                    damping, out_dir, f"{Path(args.calibration).name}, first {len(texts)} "
                    f"sentences, sequential at R = {rank}, damping {damping:g}")
                bertnp.write_safetensors(path, tensors, meta)
                stats[len(texts), f"sequential_R{rank}_d{damping:g}"] = path

    runs = [] if args.no_weight_only else [(rank, None, None, None) for rank in args.ranks]
    runs += [(rank, size, damping, weighting) for rank in args.ranks for size in args.sizes
             for damping in args.dampings for weighting in args.weightings]
    if args.sequential:
        runs += [(rank, max(args.sizes), damping, f"sequential_R{rank}_d{damping:g}")
                 for rank in args.ranks for damping in args.dampings]
    results = []
    for rank, size, damping, weighting in runs:
        label = "weight" if size is None else f"data_n{size}_d{damping:g}_{weighting}"
        out, report = out_dir / f"cal_{label}_R{rank}.safetensors", out_dir / f"cal_{label}_R{rank}.json"
        cmd = [args.tenfold, "attention", "compress", str(model), "--shared-dim", str(rank),
               "--heads", str(heads), "--quiet", "--out", str(out), "--report", str(report)]
        if size is not None:
            cmd += ["--calibration", str(stats[size, weighting]), "--damping", repr(damping)]
        _, seconds = run.run_cli(cmd)
        rep = json.loads(report.read_text())
        tensors, _ = bertnp.read_safetensors(out)
        entry = {"rank": rank, "calibration_sentences": size, "damping": damping,
                 "weighting": weighting,
                 "command": " ".join(Path(c).name if c == str(model) else c for c in cmd),
                 "seconds": seconds, "cpu_seconds_reported": rep["seconds"],
                 "qk_error": [l["relative_error"] for l in rep["layers"]],
                 "data_error": [l.get("data_relative_error") for l in rep["layers"]],
                 "sets": {name: measure(tensors, tokens, ref)
                          for name, (tokens, ref) in sets.items()}}
        results.append(entry)
        print(f"R={rank} {label}: " + ", ".join(
            f"{n} {m['cosine_mean']:.4f}/{m['cosine_min']:.4f}" for n, m in entry["sets"].items())
            + f", {seconds:.1f} s", flush=True)
    (out_dir / "calibration.json").write_text(json.dumps(results, indent=2))
    (out_dir / "calibration.md").write_text(table(results))
    print(f"wrote {out_dir / 'calibration.json'} and {out_dir / 'calibration.md'}")


def sequential_statistics(tenfold, model, original, heads, eps, tokens, rank, damping, out_dir,
                          source):
    """Moments of layer l measured on the model whose layers < l are already compressed
    (each with its own sequential moment), as GPTQ-style methods calibrate. Every
    layer's compression depends only on its own moment, so the CLI given the returned
    statistics reproduces the model built here."""
    current = dict(original)
    fixed = {}
    layers = bertnp.layer_count(original)
    for layer in range(layers):
        moments, count = calibrate.input_moments(current, heads, eps, tokens)
        fixed[layer] = 0.5 * (moments[layer] + moments[layer].T)
        stats = {bertnp.attention_prefix(j) + "input_moment":
                 fixed[j] if j in fixed else 0.5 * (moments[j] + moments[j].T)
                 for j in range(layers)}
        path, out = out_dir / "sequential_step.safetensors", out_dir / "sequential_step_out.safetensors"
        bertnp.write_safetensors(path, stats, {"tenfold.calibration.tokens": count})
        run.run_cli([tenfold, "attention", "compress", str(model), "--shared-dim", str(rank),
                     "--heads", str(heads), "--quiet", "--calibration", str(path),
                     "--damping", repr(damping), "--out", str(out)])
        compressed, _ = bertnp.read_safetensors(out)
        p = bertnp.attention_prefix(layer)
        collab = {k[len(p):]: v for k, v in compressed.items() if k.startswith(p + "collab.")}
        current = bertnp.replace_query_key(current, {layer: collab})
    return ({bertnp.attention_prefix(j) + "input_moment": fixed[j] for j in range(layers)},
            {"tenfold.calibration.tokens": count, "tenfold.calibration.source": source})


def table(results):
    names = list(SETS)
    lines = ["| R | objective | calibration sentences | weights | damping | QK error (layers 0..5) | "
             "data error (layers 0..5) | " + " | ".join(
                 f"{n}: cosine mean / min, NN, TV" for n in names) + " | time (s) |",
             "| ---: | --- | ---: | --- | ---: | --- | --- |" + " --- |" * len(names) + " ---: |"]
    for e in results:
        data = e["calibration_sentences"] is not None
        cells = [f"{m['cosine_mean']:.4f} / {m['cosine_min']:.4f}, {m['nn_agreement']:.2f}, "
                 f"{m['tv_mean']:.3f}" for m in (e["sets"][n] for n in names)]
        lines.append(
            f"| {e['rank']} | {'data' if data else 'weight'} | "
            f"{e['calibration_sentences'] if data else '-'} | "
            f"{e['weighting'] if data else '-'} | "
            f"{e['damping'] if data else '-'} | " + " ".join(f"{x:.3f}" for x in e["qk_error"])
            + " | " + (" ".join(f"{x:.3f}" for x in e["data_error"]) if data else "-") + " | "
            + " | ".join(cells) + f" | {e['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
