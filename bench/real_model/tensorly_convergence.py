"""How far the reference recipe is from converged: TensorLy parafac (random init, tol 0)
on one layer's formed attention tensor, with the relative error after every iteration,
in float64 and float32. Writes a JSON with both histories."""

import argparse
import json
import time

import numpy as np

import bertnp
import minilm


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layer", type=int, default=5)
    ap.add_argument("--rank", type=int, default=192)
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import tensorly as tl
    from tensorly.decomposition import parafac

    tl.set_backend("numpy")
    tensors, _ = bertnp.read_safetensors(minilm.checkpoint())
    heads = minilm.config()["num_attention_heads"]
    t = bertnp.attention_tensor(tensors, args.layer, heads)
    result = {"layer": args.layer, "rank": args.rank, "seed": args.seed}
    for dtype in (np.float64, np.float32):
        start = time.perf_counter()
        _, errors = parafac(t.astype(dtype), rank=args.rank, n_iter_max=args.iters,
                            init="random", tol=0.0, random_state=args.seed,
                            return_errors=True)
        name = np.dtype(dtype).name
        result[name] = {"seconds": time.perf_counter() - start,
                        "errors": [float(e) for e in errors]}
        print(f"{name}: {len(errors)} iterations, error {errors[0]:.4f} -> "
              f"{errors[99]:.4f} (100) -> {errors[-1]:.4f}, "
              f"{result[name]['seconds']:.0f} s", flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
