"""Writes a synthetic BERT-base-sized safetensors checkpoint (NumPy only).

12 layers of BERT-base attention (H = 12 heads, D = 768, d = 64) with query/key/value/
output weights N(0, 1/D) and biases N(0, 0.1^2), plus word embeddings, in float32 and
with BERT names, so that `tenfold attention compress` can be timed end to end:

    python3 bench/attention/make_checkpoint.py OUT.safetensors [--layers 12] [--seed 0]
    time build/tools/tenfold attention compress OUT.safetensors --shared-dim 384 \
        --heads 12 --out small.safetensors
"""
import argparse
import json
import struct

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    d = args.width
    tensors = {"bert.embeddings.word_embeddings.weight":
               rng.normal(0, 0.02, (30522, d)).astype(np.float32)}
    for layer in range(args.layers):
        p = f"bert.encoder.layer.{layer}.attention."
        for name in ("self.query", "self.key", "self.value", "output.dense"):
            tensors[p + name + ".weight"] = rng.normal(0, d ** -0.5, (d, d)).astype(np.float32)
            tensors[p + name + ".bias"] = rng.normal(0, 0.1, d).astype(np.float32)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors.values():
            f.write(t.tobytes())


if __name__ == "__main__":
    main()
