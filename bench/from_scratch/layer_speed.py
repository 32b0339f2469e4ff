"""Forward and backward time of the trainable collaborative attention layer against
torch.nn.MultiheadAttention and transformers' sdpa attention (BERT's self-attention
plus its output projection) at one size (docs/performance.md).

    python bench/from_scratch/layer_speed.py [--dim 768] [--heads 12] [--shapes 8x128,8x512]
        [--repeats 5] [--threads 1]

Every module maps (B, n, D) to (B, n, D) with the same value and output projections;
the collaborative layer at R = H d, H d / 2 and H d / 4. Prints one JSON line per
shape: the median milliseconds of `repeats` forwards (eval mode, no autograd) and of
`repeats` forward + backward passes (train mode, dropout 0), after a warm-up call.
"""

import argparse
import json
import statistics
import time

import torch
import transformers as tr

import tenfold.torch as tt


def hf_sdpa(dim, heads):
    """transformers' BERT self-attention with the sdpa implementation and its output
    projection: the attention of a transformers model of the original size."""
    cfg = tr.BertConfig(hidden_size=dim, num_attention_heads=heads, intermediate_size=4 * dim,
                        num_hidden_layers=1, attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = "sdpa"
    attention = tr.BertModel(cfg).encoder.layer[0].attention
    return lambda x: attention.output.dense(attention.self(x)[0]), attention


def median_ms(step, repeats):
    step()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def timings(call, module, x, repeats):
    module.eval()
    with torch.no_grad():
        forward = median_ms(lambda: call(x), repeats)
    module.train()
    xg = x.clone().requires_grad_(True)

    def both():
        call(xg).sum().backward()

    return forward, median_ms(both, repeats)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--shapes", default="8x128,8x512", help="comma-separated BATCHxTOKENS")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    d, h = args.dim, args.heads
    mha = torch.nn.MultiheadAttention(d, h, batch_first=True)
    sdpa_call, sdpa_module = hf_sdpa(d, h)
    modules = {"mha": (lambda x: mha(x, x, x, need_weights=False)[0], mha), "hf_sdpa": (sdpa_call, sdpa_module)}
    for r in (d, d // 2, d // 4):
        layer = tt.CollaborativeAttention(d, h, r)
        modules[f"collab_R{r}"] = (lambda x, layer=layer: layer(x)[0], layer)
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "dim": d, "heads": h}))
    for shape in args.shapes.split(","):
        b, n = (int(v) for v in shape.split("x"))
        x = torch.randn(b, n, d)
        row = {"batch": b, "tokens": n}
        for name, (call, module) in modules.items():
            fwd, fwd_bwd = timings(call, module, x, args.repeats)
            row[f"{name}_forward_ms"] = round(fwd, 1)
            row[f"{name}_forward_backward_ms"] = round(fwd_bwd, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
