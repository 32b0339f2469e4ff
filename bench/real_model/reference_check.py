"""One-time check: the NumPy forward pass of all-MiniLM-L6-v2 (bertnp) gives the same
sentence embeddings as sentence-transformers on the sentences of sentences.txt. Also
reports how far the exact full-rank collaborative form, built in NumPy, moves them.

Runs in the reference environment (setup_env.sh --reference). Exits non-zero when the
largest absolute difference of an embedding entry exceeds 1e-5.
"""

import argparse
import json
import sys

import numpy as np

import bertnp
import minilm

TOLERANCE = 1e-5


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", help="write the result to this file")
    args = ap.parse_args()

    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    texts = minilm.sentences()
    model = SentenceTransformer(str(minilm.model_dir()), device="cpu")
    reference = model.encode(texts, batch_size=32, convert_to_numpy=True)

    tensors, _ = bertnp.read_safetensors(minilm.checkpoint())
    ours, _ = minilm.embed(minilm.encoder(tensors), minilm.tokenize(texts))

    # The exact collaborative form built in NumPy, in float64 and rounded to float32.
    heads = minilm.config()["num_attention_heads"]
    full = {layer: bertnp.full_rank_collab(tensors, layer, heads)
            for layer in range(bertnp.layer_count(tensors))}
    full_rank = {}
    for dtype in (np.float64, np.float32):
        collab = bertnp.replace_query_key(tensors, full, dtype=dtype)
        emb, _ = minilm.embed(minilm.encoder(collab), minilm.tokenize(texts))
        full_rank[np.dtype(dtype).name] = float(np.abs(emb - ours).max())

    diff = np.abs(ours - reference.astype(np.float64))
    cosine = np.sum(ours * reference, axis=1) / np.linalg.norm(reference, axis=1)
    result = {
        "sentences": len(texts),
        "max_abs_diff": float(diff.max()),
        "mean_abs_diff": float(diff.mean()),
        "min_cosine": float(cosine.min()),
        "tolerance": TOLERANCE,
        "passed": bool(diff.max() <= TOLERANCE),
        "full_rank_collaborative_max_abs_diff": full_rank,
        "sentence_transformers": sentence_transformers.__version__,
        "torch": torch.__version__,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
