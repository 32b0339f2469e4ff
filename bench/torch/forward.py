"""Forward time of tenfold.torch's collaborative attention against the original
attention of a BERT-base-sized layer (D = 768, H = 12, d = 64), and GPT-2's key cache.

    python bench/torch/forward.py [--batch 8] [--tokens 128] [--repeats 20] [--dtype float32]

Both modules run the same value and output path; the collaborative one at R = 768
(full rank), 384 and 256 with random collaborative tensors (the time does not depend
on their values). Prints the median of `repeats` timed forwards per module, after two
warm-up calls, in torch's default (sdpa) and eager implementations, then GPT-2's
(124M, random weights) key and value cache after greedy generation, original and at
each R.
"""

import argparse
import json
import statistics
import time

import numpy as np
import torch
import transformers as tr

import tenfold.torch as tt


def bert_layer(impl, dtype):
    cfg = tr.BertConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072, num_hidden_layers=1,
                        attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = impl
    return tr.BertModel(cfg).to(dtype).eval()


def collab_tensors(rng, rank, heads=12, dim=768):
    return {"collab.mixing": rng.standard_normal((heads, rank)) / 8, "collab.query.weight": rng.standard_normal(
        (rank, dim)) / 28, "collab.key.weight": rng.standard_normal((rank, dim)) / 28,
            "collab.content_bias.weight": rng.standard_normal((heads, dim)) / 28}


def median_ms(module, x, mask, repeats):
    with torch.no_grad():
        for _ in range(2):
            module(x, attention_mask=mask)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            module(x, attention_mask=mask)
            times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--part", choices=["all", "forward", "cache"], default="all")
    ap.add_argument("--cache-ranks", default="0,768,384,256,128", help="0: the original model")
    args = ap.parse_args()
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "batch": args.batch,
                      "tokens": args.tokens, "dtype": args.dtype}))
    dtype = getattr(torch, args.dtype)
    rng = np.random.default_rng(0)
    x = torch.randn(args.batch, args.tokens, 768, dtype=dtype)
    rows = []
    for impl in ("sdpa", "eager") if args.part != "cache" else ():
        model = bert_layer(impl, dtype)
        name = "encoder.layer.0.attention.self"
        original = model.get_submodule(name)
        # The additive float mask eager passes, or sdpa's boolean one: no padding.
        mask = (torch.zeros(args.batch, 1, args.tokens, args.tokens, dtype=dtype) if impl == "eager"
                else torch.ones(args.batch, 1, args.tokens, args.tokens, dtype=torch.bool))
        row = {"impl": impl, "original_ms": median_ms(original, x, mask, args.repeats)}
        for rank in (768, 384, 256):
            m = bert_layer(impl, dtype)
            tt.convert(m, {name: collab_tensors(rng, rank)})
            row[f"R{rank}_ms"] = median_ms(m.get_submodule(name), x, mask, args.repeats)
        rows.append(row)
        print(json.dumps(row))
    # GPT-2 (D = 768, H = 12, d = 64, 12 layers): the cache after greedy generation of
    # 32 tokens from a 32-token prompt, measured on the cache object itself.
    prompt = torch.randint(0, 50257, (1, 32), generator=torch.Generator().manual_seed(0))
    for rank in [int(r) for r in args.cache_ranks.split(",")] if args.part != "forward" else []:
        model = tr.GPT2LMHeadModel(tr.GPT2Config()).eval()
        if rank:
            tt.convert(model, {w.name: collab_tensors(rng, rank) for w in tt.attention_layers(model)})
        with torch.no_grad():
            out = model.generate(prompt, max_new_tokens=32, do_sample=False, use_cache=True,
                                 return_dict_in_generate=True, pad_token_id=0)
        layers = out.past_key_values.layers
        keys = sum(l.keys.nelement() * l.keys.element_size() for l in layers)
        values = sum(l.values.nelement() * l.values.element_size() for l in layers)
        print(json.dumps({"gpt2_cache": {"R": rank, "tokens": layers[0].keys.shape[-2],
                                         "key_shape": list(layers[0].keys.shape), "key_bytes": keys,
                                         "value_bytes": values}}))


if __name__ == "__main__":
    main()
