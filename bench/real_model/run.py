"""Compresses all-MiniLM-L6-v2 with `tenfold attention compress` at several shared
dimensions and with the TensorLy reference recipe, and measures what it costs.

Steps: `tenfold attention analyze` (checked against a NumPy computation of the same
energy curves); `tenfold attention compress` per R (checked: every tensor other than
the query/key ones is copied bit for bit); the TensorLy recipe (tensorly_recipe.py,
kept on disk between runs); then a float64 NumPy forward pass of every model over
sentences.txt against the original. Writes results.json and tables.md to --out.
"""

import argparse
import json
import subprocess
import time
from pathlib import Path

import numpy as np

import bertnp
import minilm
import tensorly_recipe

THRESHOLDS = [0.9, 0.95, 0.99]
CURVES = {"products": "P", "queries": "W_Q", "keys": "W_K"}


def run_cli(args):
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout, seconds


def analyze(tenfold, model, tensors, heads, out_dir):
    """The CLI's energy analysis, compared with the NumPy one; returns the CLI's JSON."""
    text, _ = run_cli([tenfold, "attention", "analyze", model, "--heads", str(heads), "--json"])
    result = json.loads(text)
    (out_dir / "analyze.json").write_text(json.dumps(result, indent=2))
    for layer, entry in enumerate(result["layers"]):
        ours = bertnp.energy_curves(tensors, layer, heads)
        for key, curve in ours.items():
            theirs = np.asarray(entry[key]["cumulative"])
            dims = [entry[key][k] for k in ("dim90", "dim95", "dim99")]
            gap = np.abs(theirs - curve).max()
            if gap > 1e-4 or dims != bertnp.dims_for(curve, THRESHOLDS):
                raise RuntimeError(f"analyze: layer {layer} {key} differs from NumPy "
                                   f"(largest gap {gap:.2e}, dims {dims})")
    return result


def parameter_counts(tensors, layers):
    """(query/key parameters, all floating-point parameters) of a checkpoint."""
    qk = 0
    for layer in range(layers):
        p = bertnp.attention_prefix(layer)
        qk += sum(v.size for k, v in tensors.items()
                  if k.startswith((p + "query.", p + "key.", p + "collab.")))
    total = sum(v.size for v in tensors.values() if v.dtype.kind == "f")
    return int(qk), int(total)


def read_checked(path):
    """Reads a checkpoint with the NumPy reader and checks that the safetensors package
    reads the same tensors (the file follows the format)."""
    from safetensors.numpy import load_file

    tensors, metadata = bertnp.read_safetensors(path)
    official = load_file(str(path))
    if set(official) != set(tensors) or any(
            official[k].dtype != v.dtype or official[k].tobytes() != v.tobytes()
            for k, v in tensors.items()):
        raise RuntimeError(f"{path}: the safetensors package reads other tensors")
    return tensors, metadata


def check_copied(original, compressed, layers):
    """Every tensor that is not a query/key weight or bias must be copied bit for bit."""
    replaced = tuple(bertnp.attention_prefix(layer) + side for layer in range(layers)
                     for side in ("query.", "key."))
    for name, value in original.items():
        if name.startswith(replaced):
            if name in compressed:
                raise RuntimeError(f"{name} was not replaced")
        elif name not in compressed or compressed[name].tobytes() != value.tobytes():
            raise RuntimeError(f"{name} was not copied bit for bit")


def downstream(original, tensors, tokens, heads, reference):
    """Attention and embedding figures of a compressed model against the original."""
    emb0, probs0 = reference
    emb, probs = minilm.embed(minilm.encoder(tensors), tokens)
    layers = len(probs0[0])
    # Total-variation distance of each (sentence, layer, head, query token) row.
    tv = [[] for _ in range(layers)]
    for p0, p1 in zip(probs0, probs):
        for layer in range(layers):
            tv[layer].append((0.5 * np.abs(p0[layer] - p1[layer]).sum(axis=-1)).ravel())
    tv = [np.concatenate(rows) for rows in tv]
    cosine = np.sum(emb0 * emb, axis=1)
    return {
        "qk_relative_error": [bertnp.qk_relative_error(original, tensors, layer, heads)
                              for layer in range(layers)],
        "tv_mean": float(np.concatenate(tv).mean()),
        "tv_mean_per_layer": [float(t.mean()) for t in tv],
        "cosine_mean": float(cosine.mean()),
        "cosine_min": float(cosine.min()),
        "nn_agreement": float(np.mean(nearest_neighbours(emb0) == nearest_neighbours(emb))),
    }


def nearest_neighbours(emb):
    sim = emb @ emb.T
    np.fill_diagonal(sim, -np.inf)
    return sim.argmax(axis=1)


def with_options(budget, extra):
    """The iteration budget's options, less those that `extra` gives again, then `extra`."""
    kept = [x for flag, value in budget.items() if flag not in extra for x in (flag, value)]
    return kept + extra


def tenfold_model(tenfold, model, rank, heads, out_dir, options, label=""):
    """Runs `tenfold attention compress` with `options` (a list of extra arguments)."""
    stem = f"tenfold{'_' + label if label else ''}_R{rank}"
    out, report = out_dir / f"{stem}.safetensors", out_dir / f"{stem}.json"
    _, seconds = run_cli([tenfold, "attention", "compress", model, "--shared-dim", str(rank),
                          "--heads", str(heads), *options, "--out", out, "--report", report])
    return out, json.loads(report.read_text()), seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tenfold", required=True, help="the tenfold program")
    ap.add_argument("--out", default="out/real_model")
    ap.add_argument("--ranks", type=int, nargs="+", default=[384, 288, 192, 128, 96, 64])
    ap.add_argument("--tensorly-ranks", type=int, nargs="+", default=[192, 128])
    ap.add_argument("--max-iters", type=int, default=100)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=ARGS",
                    help="also compress with these extra arguments (which may replace "
                         "--max-iters and --tol) at --variant-ranks, e.g. 'random=--init random'")
    ap.add_argument("--variant-ranks", type=int, nargs="+", default=[192, 128])
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    model = minilm.checkpoint()
    heads = minilm.config()["num_attention_heads"]
    original, _ = bertnp.read_safetensors(model)
    layers = bertnp.layer_count(original)
    tokens = minilm.tokenize(minilm.sentences())
    reference = minilm.embed(minilm.encoder(original), tokens)
    qk0, total0 = parameter_counts(original, layers)
    results = {"model": str(model), "sentences": len(tokens), "heads": heads,
               "max_iters": args.max_iters, "tol": args.tol,
               "original": {"qk_params": qk0, "total_params": total0},
               "analyze": analyze(args.tenfold, model, original, heads, out_dir),
               "tenfold": [], "tensorly": []}

    budget = {"--max-iters": str(args.max_iters), "--tol": str(args.tol)}
    runs = [("", rank, with_options(budget, [])) for rank in args.ranks]
    runs += [(label, rank, with_options(budget, extra.split()))
             for label, extra in (v.split("=", 1) for v in args.variant)
             for rank in args.variant_ranks]
    for label, rank, options in runs:
        path, report, seconds = tenfold_model(args.tenfold, model, rank, heads, out_dir,
                                              options, label)
        tensors, metadata = read_checked(path)
        check_copied(original, tensors, layers)
        qk, total = parameter_counts(tensors, layers)
        entry = {"rank": rank, "label": label, "options": options, "seconds": seconds,
                 "qk_params": qk, "total_params": total, "report": report,
                 "metadata": metadata}
        entry.update(downstream(original, tensors, tokens, heads, reference))
        results["tenfold"].append(entry)
        print(f"tenfold{' (' + label + ')' if label else ''} R={rank}: "
              f"cosine mean {entry['cosine_mean']:.6f}, "
              f"{seconds:.1f} s", flush=True)

    for rank in args.tensorly_ranks:
        path, report_path = tensorly_recipe.run(rank, out_dir, args.max_iters, args.tol)
        report = json.loads(report_path.read_text())
        tensors, _ = read_checked(path)
        qk, total = parameter_counts(tensors, layers)
        entry = {"rank": rank, "seconds": sum(x["seconds"] for x in report["layers"]),
                 "qk_params": qk, "total_params": total, "report": report}
        entry.update(downstream(original, tensors, tokens, heads, reference))
        results["tensorly"].append(entry)
        print(f"TensorLy R={rank}: cosine mean {entry['cosine_mean']:.6f}", flush=True)

    all_ranks = sorted(set(args.ranks) | set(args.tensorly_ranks), reverse=True)
    results["qk_error_floor"] = {
        rank: [bertnp.qk_error_lower_bound(original, i, heads, rank) for i in range(layers)]
        for rank in all_ranks}
    results["qk_error_per_head"] = {
        rank: [bertnp.per_head_truncation_error(original, i, heads, rank) for i in range(layers)]
        for rank in all_ranks}
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
    (out_dir / "tables.md").write_text(tables(results))
    print(f"wrote {out_dir / 'results.json'} and {out_dir / 'tables.md'}")


def tables(results):
    """Markdown tables of the results."""
    o = results["original"]
    lines = ["| method | R | QK rel. error (layers 0..5) | mean TV | cosine mean | "
             "cosine min | NN unchanged | iterations | time (s) | Q/K params | total params |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
             f"| original | - | - | - | 1 | 1 | 1 | - | - | {o['qk_params']:,} | "
             f"{o['total_params']:,} |"]
    rows = [(f"tenfold ({e['label']})" if e["label"] else "tenfold", e)
            for e in results["tenfold"]] + [("TensorLy", e) for e in results["tensorly"]]
    for name, e in sorted(rows, key=lambda r: (-r[1]["rank"], r[0])):
        errors = " ".join(f"{x:.3g}" for x in e["qk_relative_error"])
        its = [layer["iterations"] for layer in e["report"]["layers"]]
        its = f"{min(its)}-{max(its)}" if min(its) != max(its) else str(its[0])
        lines.append(
            f"| {name} | {e['rank']} | {errors} | {e['tv_mean']:.3g} | {e['cosine_mean']:.7f} | "
            f"{e['cosine_min']:.7f} | {e['nn_agreement']:.3f} | {its} | {e['seconds']:.1f} | "
            f"{e['qk_params']:,} | {e['total_params']:,} |")
    lines += ["", "| R | floor under any rank-R CP model (layers 0..5) | "
              "best rank-R model without shared components (layers 0..5) |",
              "| ---: | --- | --- |"]
    for rank, floor in results["qk_error_floor"].items():
        alone = results["qk_error_per_head"][rank]
        lines.append(f"| {rank} | " + " ".join(f"{x:.3g}" for x in floor) + " | " +
                     " ".join(f"{x:.3g}" for x in alone) + " |")
    lines += ["", "| layer | " + " | ".join(f"{m} 90/95/99 %" for m in CURVES.values()) + " |",
              "| ---: | --- | --- | --- |"]
    for layer, entry in enumerate(results["analyze"]["layers"]):
        dims = ["/".join(str(entry[m][k]) for k in ("dim90", "dim95", "dim99")) for m in CURVES]
        lines.append(f"| {layer} | " + " | ".join(dims) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
