"""The reference recipe: TensorLy parafac on the formed attention tensor of each layer
(T[h] = W_Q^h W_K^hᵀ / sqrt(d), H x D x D, float64, NumPy backend, CPU), random init,
at most 100 iterations, tol 1e-6 on the change of relative error.

Writes, per rank R, a checkpoint in the layout of `tenfold attention compress` (mixing =
first factor times the weights, W̃_Q and W̃_K the other two factors, content bias kept
exactly) and a report JSON with each layer's relative error, iterations and seconds.
An existing pair of outputs made with the same settings is reused unless --force is
given: the recipe is slow.
"""

import argparse
import json
import time
from pathlib import Path

import bertnp
import minilm


def compress_layer(tensors, layer, heads, rank, max_iters, tol, seed):
    import tensorly as tl
    from tensorly.decomposition import parafac

    tl.set_backend("numpy")
    t = bertnp.attention_tensor(tensors, layer, heads)
    start = time.perf_counter()
    cp, errors = parafac(
        t, rank=rank, n_iter_max=max_iters, init="random", tol=tol, random_state=seed,
        return_errors=True)
    seconds = time.perf_counter() - start
    weights, (m, wq, wk) = cp
    collab = bertnp.collab_tensors(
        m * weights[None, :], wq.T, wk.T, bertnp.content_bias(tensors, layer, heads))
    return collab, {"iterations": len(errors), "seconds": seconds}


def run(rank, out_dir, max_iters=100, tol=1e-6, seed=0, force=False):
    """Compresses every layer at `rank`; returns (checkpoint path, report path)."""
    out_dir = Path(out_dir)
    model = out_dir / f"tensorly_R{rank}.safetensors"
    report_path = out_dir / f"tensorly_R{rank}.json"
    settings = {"max_iters": max_iters, "tol": tol, "seed": seed}
    if model.is_file() and report_path.is_file() and not force:
        kept = json.loads(report_path.read_text())
        if all(kept.get(k) == v for k, v in settings.items()):
            return model, report_path
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors, _ = bertnp.read_safetensors(minilm.checkpoint())
    heads = minilm.config()["num_attention_heads"]
    collab, layers = {}, []
    for layer in range(bertnp.layer_count(tensors)):
        collab[layer], info = compress_layer(tensors, layer, heads, rank, max_iters, tol, seed)
        compressed = {bertnp.attention_prefix(layer) + k: v for k, v in collab[layer].items()}
        info["relative_error"] = bertnp.qk_relative_error(tensors, compressed, layer, heads)
        layers.append(info)
        print(f"TensorLy R={rank} layer {layer}: relative error {info['relative_error']:.4f}, "
              f"{info['iterations']} iterations, {info['seconds']:.1f} s", flush=True)
    bertnp.write_safetensors(model, bertnp.replace_query_key(tensors, collab), {
        "shared_dim": rank, "heads": heads, "method": "tensorly parafac",
        "scale": "scale folded into mixing and content_bias"})
    report = {"method": "tensorly parafac", "shared_dim": rank, **settings, "dtype": "float64",
              "layers": layers}
    report_path.write_text(json.dumps(report, indent=2))
    return model, report_path


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ranks", type=int, nargs="+", default=[192, 128])
    ap.add_argument("--out", default="out/real_model")
    ap.add_argument("--max-iters", type=int, default=100)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    for rank in args.ranks:
        run(rank, args.out, args.max_iters, args.tol, args.seed, args.force)


if __name__ == "__main__":
    main()
