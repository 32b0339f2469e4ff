"""The decode-time read of the compressed cache: the library's kernel (_tenfold.cache_attention)
against torch's products, alone and inside decode steps (docs/kv-cache.md, "Reading the cache").

    python bench/kv_cache/read_kernel.py [--tokens 8192] [--reps 5]

1. Alone: one query of 9 heads against one shared key head (64 values) and one latent value
   head (128), 30 layers' caches read in turn (as a decode step reads them: each from memory,
   not from the processor's cache), milliseconds per layer, medians of --reps.
2. In decode steps: SmolLM2-135M's shape with random weights, converted with kv_cache=0.5,
   prefill of --tokens, then 16 greedy steps, the kernel and torch's products alternating;
   milliseconds per step and the share of the layers' `attend`.
Threads as the process has them (torch's and the library's defaults)."""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from tenfold import _tenfold
import tenfold.torch as tt
from tenfold.torch import rotary_attention

LAYERS, HEADS, KEYS, VALUES = 30, 9, 64, 128


def alone(tokens: int, reps: int) -> dict:
    torch.manual_seed(0)
    # views of buffers with room, as the converted layer's cache holds them
    keys = [torch.randn(1, 1, tokens + 256, KEYS)[:, :, :tokens] for _ in range(LAYERS)]
    values = [torch.randn(1, 1, tokens + 256, VALUES)[:, :, :tokens] for _ in range(LAYERS)]
    q = torch.randn(1, HEADS, 1, KEYS)
    scale = KEYS**-0.5

    def products(k, v):
        s = torch.matmul(q.reshape(1, 1, HEADS, KEYS), k.transpose(-1, -2)) * scale
        return torch.matmul(torch.softmax(s, dim=-1), v).view(1, HEADS, 1, VALUES)

    def kernel(k, v):
        out = q.new_empty(1, HEADS, 1, VALUES)
        _tenfold.cache_attention(q, k, v, None, False, scale, out)
        return out

    times = {"torch": [], "kernel": []}
    with torch.inference_mode():
        diff = float((products(keys[0], values[0]) - kernel(keys[0], values[0])).abs().max())
        for _ in range(reps):
            for name, f in (("torch", products), ("kernel", kernel)):
                t = time.perf_counter()
                for k, v in zip(keys, values):
                    f(k, v)
                times[name].append((time.perf_counter() - t) / LAYERS * 1e3)
    return {name: statistics.median(t) for name, t in times.items()} | {"max_difference": diff}


def in_steps(tokens: int, reps: int) -> dict:
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=3, rms_norm_eps=1e-5,
                         tie_word_embeddings=True, max_position_embeddings=tokens + 64,
                         rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
                         attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    tt.compress_model(model, kv_cache=0.5)
    ids = torch.randint(config.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))
    layer = rotary_attention.RotarySharedKeyAttention
    reads, attend = layer.reads_cache, layer.attend
    spent = [0.0]

    def timed_attend(self, *args):
        t = time.perf_counter()
        out = attend(self, *args)
        spent[0] += time.perf_counter() - t
        return out

    layer.attend = timed_attend
    rows = {"kernel": [], "torch": []}
    try:
        for _ in range(reps):
            for name in rows:
                layer.reads_cache = reads if name == "kernel" else (lambda *a: False)
                with torch.inference_mode():
                    cache = DynamicCache(config=config)
                    token = model(input_ids=ids, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
                    spent[0] = 0.0
                    t = time.perf_counter()
                    for _ in range(16):
                        token = model(input_ids=token, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
                    rows[name].append(((time.perf_counter() - t) / 16 * 1e3, spent[0] / 16 * 1e3))
    finally:
        layer.reads_cache, layer.attend = reads, attend
    return {name: {"step_ms": statistics.median(r[0] for r in v), "attend_ms": statistics.median(r[1] for r in v)}
            for name, v in rows.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    a = alone(args.tokens, args.reps)
    print(f"alone, {args.tokens} cached tokens: torch {a['torch']:.3f} ms per layer, kernel {a['kernel']:.3f} "
          f"({a['torch'] / a['kernel']:.2f}x), largest difference {a['max_difference']:.1e}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    s = in_steps(args.tokens, args.reps)
    print(f"decode steps at {args.tokens} tokens: kernel {s['kernel']['step_ms']:.1f} ms per step "
          f"(attend {s['kernel']['attend_ms']:.1f}), torch's products {s['torch']['step_ms']:.1f} "
          f"(attend {s['torch']['attend_ms']:.1f}); load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
