"""The KV-cache benchmark of a compressed decoder (SmolLM2-135M-Instruct): perplexity on
held-out text, greedy agreement with the original, cache bytes measured from the cache
object after prefill, prefill and decode tokens per second, for the original and the
shared-key / latent-value conversions of tenfold.torch at fractions of the KV cache.

    python bench/kv_cache/run.py --out DIR [--quick] [--rows TEXT ...]
        [--speed-only [--joint] [--kv-cache F] [--cache-dtype bfloat16|float8_e4m3fn] [--device cuda]
                      [--random-weights] [--dtype bfloat16] [--lengths N ...]]
                                                                    # the environment of bench/rope

Held-out text (none of it in the calibration text):
  - the licence texts Debian ships in every installation (/usr/share/common-licenses:
    GNU GPL, LGPL, FDL, Apache, Artistic, Mozilla; each licence permits verbatim copies);
  - the docstrings of a fixed list of Python standard-library modules (Python Software
    Foundation License), read from the running interpreter.
Calibration text: bench/real_model/calibration's prose (CC0) and the docstrings of other
standard-library modules (CALIBRATION_MODULES, disjoint from MODULES).
Perplexity over 2,048-token windows, of both sources together and of each. Greedy
agreement: continuations of 32 tokens from
prompts cut from the held-out text, the mean fraction of tokens before the first
disagreement with the original. Speed: prefill of n tokens with transformers' dynamic
cache, then 32 greedy decode steps, median of `reps` runs alternating with the original
(each row's "decode x" compares runs under the same load), torch's threads; the cache
bytes are summed over its tensors after prefill. Writes DIR/results.json and prints a
table; docs/kv-cache.md gives the figures.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import inspect
import json
import math
import os
import resource
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), "rope"), HERE]  # bench/rope/run.py is `run`

import low_rank  # noqa: E402
import run as rope  # noqa: E402

import tenfold.torch as tt  # noqa: E402

LICENCES = "/usr/share/common-licenses"
MODULES = ["argparse", "asyncio", "collections", "concurrent.futures", "contextlib", "csv", "dataclasses",
           "datetime", "decimal", "email.message", "enum", "fractions", "functools", "heapq", "http.client",
           "inspect", "io", "ipaddress", "itertools", "json", "logging", "multiprocessing", "os", "pathlib",
           "pickle", "random", "re", "shutil", "socket", "sqlite3", "statistics", "string", "subprocess",
           "tarfile", "tempfile", "textwrap", "threading", "typing", "unittest", "urllib.parse", "uuid",
           "xml.etree.ElementTree", "zipfile"]
CALIBRATION_MODULES = ["abc", "ast", "base64", "bisect", "calendar", "cmd", "codecs", "copy", "difflib", "dis",
                       "doctest", "filecmp", "fnmatch", "ftplib", "getopt", "gettext", "glob", "gzip", "hashlib",
                       "hmac", "html.parser", "imaplib", "locale", "mailbox", "mimetypes", "numbers", "operator",
                       "optparse", "pdb", "pprint", "queue", "quopri", "sched", "secrets", "selectors", "shelve",
                       "shlex", "smtplib", "struct", "symtable", "sysconfig", "timeit", "token", "tokenize",
                       "trace", "traceback", "types", "wave", "weakref", "zipimport", "bz2", "lzma",
                       "configparser", "graphlib"]


def licence_text() -> str:
    """Each distinct licence file once (GPL, LGPL ... are links to versioned files)."""
    seen, parts = set(), []
    for name in sorted(os.listdir(LICENCES)):
        path = os.path.realpath(os.path.join(LICENCES, name))
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        parts.append(" ".join(open(path, encoding="utf-8", errors="replace").read().split()))
    return "\n\n".join(parts)


def docstring_text(modules: list) -> str:
    """The docstrings of `modules` and of their public classes and functions, in order."""
    parts = []
    for name in modules:
        module = importlib.import_module(name)
        docs = [inspect.getdoc(module)]
        for attr in sorted(getattr(module, "__all__", None) or dir(module)):
            obj = getattr(module, attr, None)
            if attr.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if getattr(obj, "__module__", None) == module.__name__:
                docs.append(inspect.getdoc(obj))
        parts += [" ".join(d.split()) for d in docs if d]
    return "\n\n".join(parts)


def held_out(tok, tokens_per_source: int, window: int) -> dict:
    """Per source, its 2,048-token windows: the same number of tokens from each."""
    out = {}
    for source, text in (("licences", licence_text()), ("python docstrings", docstring_text(MODULES))):
        ids = tok(text, return_tensors="pt").input_ids[0][:tokens_per_source]
        out[source] = [ids[i : i + window].unsqueeze(0) for i in range(0, len(ids) - window + 1, window)]
    return out


def calibration(tok, docstring_tokens: int, length: int = 512) -> list:
    """The calibration batches: the CC0 prose, then `docstring_tokens` tokens of the
    docstrings of CALIBRATION_MODULES, in `length`-token chunks."""
    assert not set(MODULES) & set(CALIBRATION_MODULES)
    ids = tok(docstring_text(CALIBRATION_MODULES), return_tensors="pt").input_ids[0][:docstring_tokens]
    docs = [ids[i : i + length].unsqueeze(0) for i in range(0, len(ids) - length + 1, length)]
    return [{"input_ids": c} for c in rope.chunks(tok, "prose_calibration.txt", length) + docs]


def continuations(model, prompts, new: int) -> list:
    out = []
    with torch.inference_mode():
        for ids in prompts:
            out.append(model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                      pad_token_id=0)[0, ids.shape[1] :])
    return out


def cache_bytes(cache) -> int:
    """Bytes of the memory the cache holds for keys and values of every layer: the
    storage under each tensor (a view's spare room included), each storage once."""
    storages = {}
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def synchronize(device: torch.device) -> None:
    """Waits for the device's queued work (a GPU's kernels run after the call returns)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def speed(models: list, ids, steps: int, reps: int, static: bool = False) -> list:
    """Per model: prefill of ids into a fresh dynamic cache, then `steps` greedy decode
    steps, medians of `reps` runs that alternate between the models (so that a compressed
    model and the original meet the same load). `static`: the last model decodes into a
    static cache of exactly the tokens it will hold (transformers' preallocated cache: no
    copy of the cache per token, the original's fastest CPU decode)."""
    from transformers import DynamicCache, StaticCache

    times = [{"prefill": [], "decode": []} for _ in models]
    sizes = [0] * len(models)
    with torch.inference_mode():
        for _ in range(reps):
            for i, model in enumerate(models):
                if static and i == len(models) - 1:
                    cache = StaticCache(config=model.config, max_cache_len=ids.shape[1] + steps)
                else:
                    cache = DynamicCache(config=model.config)
                synchronize(ids.device)
                t0 = time.perf_counter()
                out = model(input_ids=ids, cache=cache, use_cache=True)
                synchronize(ids.device)
                t1 = time.perf_counter()
                sizes[i] = cache_bytes(cache)
                token = out.logits[:, -1:].argmax(-1)
                for _ in range(steps):
                    out = model(input_ids=token, cache=cache, use_cache=True)
                    token = out.logits[:, -1:].argmax(-1)
                synchronize(ids.device)
                t2 = time.perf_counter()
                times[i]["prefill"].append(t1 - t0)
                times[i]["decode"].append(t2 - t1)
    n = ids.shape[1]
    return [{"tokens": n, "cache_bytes": size, "prefill_tokens_per_s": n / statistics.median(t["prefill"]),
             "decode_tokens_per_s": steps / statistics.median(t["decode"])} for t, size in zip(times, sizes)]


#: SmolLM2-135M's architecture (the GGUF's metadata), for --random-weights.
SMOLLM2_135M = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, rms_norm_eps=1e-5, tie_word_embeddings=True)


def random_model(tokens: int):
    """A decoder of SmolLM2-135M's shape with random weights (seed 0), rope theta 100,000, room
    for `tokens` positions: the same work per token as the real model, for speed alone where
    the model file is not at hand (a device machine without the network)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**SMOLLM2_135M, max_position_embeddings=max(8192, tokens),
                         rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
                         attn_implementation="sdpa")
    return LlamaForCausalLM(config).eval()


def speed_only(args) -> None:
    """--speed-only: kv_cache=--kv-cache (0.5) with the default bands (or joint=True; with
    --cache-dtype, the cache stored in that dtype; the speed does not depend on the
    calibration) against the original with transformers' dynamic cache and its static cache,
    alternating, 32 decode steps, median of 5 at 2,048, 4,096 and 8,192 tokens
    (--quick: of 3, at 2,048 and 4,096; --lengths: those), on --device in --dtype (converted
    in float32 on the CPU, then moved). --random-weights: SmolLM2-135M's shape with random
    weights and random tokens instead of the model file and the held-out text."""
    lengths, reps = ((2048, 4096), 3) if args.quick else ((2048, 4096, 8192), 5)
    lengths = tuple(args.lengths or lengths)
    if args.random_weights:
        model = random_model(max(lengths) + 64)
        text = torch.randint(model.config.vocab_size, (1, max(lengths)), generator=torch.Generator().manual_seed(0))
    else:
        tok, model = rope.load()
        text = torch.cat([w for ws in held_out(tok, max(lengths), max(lengths)).values() for w in ws], dim=1)
    m = copy.deepcopy(model)
    options = {"cache_dtype": args.cache_dtype} if args.cache_dtype else {}
    tt.compress_model(m, kv_cache=args.kv_cache, joint=args.joint, **dtyped(options))
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    model, m, text = model.to(device=device, dtype=dtype), m.to(device=device, dtype=dtype), text.to(device)
    rows = []
    for n in lengths:
        compressed, original = speed([m, model], text[:, :n], 32, reps)
        static = speed([model], text[:, :n], 32, reps, static=True)[0]
        rows.append({"tokens": n, "compressed": compressed, "original": original, "original_static": static,
                     "load": os.getloadavg()})
        print(f"{n:>6} tokens: decode {compressed['decode_tokens_per_s']:.1f} tokens/s, original "
              f"{original['decode_tokens_per_s']:.1f} ({compressed['decode_tokens_per_s'] / original['decode_tokens_per_s']:.2f}x),"
              f" original with a static cache {static['decode_tokens_per_s']:.1f} "
              f"({compressed['decode_tokens_per_s'] / static['decode_tokens_per_s']:.2f}x); prefill "
              f"{compressed['prefill_tokens_per_s'] / original['prefill_tokens_per_s']:.2f}x; cache bytes "
              f"{compressed['cache_bytes'] / original['cache_bytes']:.4f} of the original's; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    name = ("speed" + ("_joint" if args.joint else "") + (f"_{args.kv_cache:g}" if args.kv_cache != 0.5 else "")
            + (f"_{args.cache_dtype}_cache" if args.cache_dtype else "")
            + ("" if args.device == "cpu" else f"_{args.device}_{args.dtype}"))
    with open(os.path.join(args.out, name + ".json"), "w") as f:
        json.dump({"model": "random weights, SmolLM2-135M's shape" if args.random_weights else rope.GGUF,
                   "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                   "dtype": args.dtype, "threads": torch.get_num_threads(), "joint": args.joint,
                   "kv_cache": args.kv_cache, "cache_dtype": args.cache_dtype, "rows": rows},
                  f, indent=1)


def configurations(quick: bool, per_head: int) -> list:
    """(label, fraction of the KV cache, method, options, data-aware) per converted row:
    tenfold.torch's compress_model with kv_cache=f (its split between keys and values, and
    joint=True: one latent for both), keys alone at half the key cache (the conversion of
    docs/rope.md), and the whitened-SVD baseline (low_rank.separate) with the same keys and
    values per token as kv_cache=f; and with a bfloat16 cache (the model computes in float32):
    the exact conversion at half the cache bytes, the joint latent at a quarter; with a float8
    cache the exact conversion at a quarter. --quick leaves out the keys alone and the joint
    latent in bfloat16 (the joint row at half the cache, rounded), for its 20 minutes."""
    rows = [] if quick else [("keys only, bands 8", 0.75, "tenfold", dict(shared_dim=per_head // 2, bands=8), True)]
    rows.append(("kv_cache, bfloat16 cache", 0.5, "tenfold", dict(kv_cache=0.5, cache_dtype="bfloat16"), True))
    if not quick:
        rows.append(("kv_cache, joint, bfloat16 cache", 0.25, "tenfold",
                     dict(kv_cache=0.25, joint=True, cache_dtype="bfloat16"), True))
    rows.append(("kv_cache, float8 cache", 0.25, "tenfold", dict(kv_cache=0.25, cache_dtype="float8_e4m3fn"), True))
    for f in ((0.5, 0.25) if quick else (0.75, 0.5, 0.25)):
        for data in ((True,) if quick else (False, True)):
            rows.append(("kv_cache, bands 8", f, "tenfold", dict(kv_cache=f, bands=8), data))
        rows.append(("kv_cache, joint", f, "tenfold", dict(kv_cache=f, joint=True), True))
        if f == 0.5:
            rows.append(("kv_cache, bands 1", f, "tenfold", dict(kv_cache=f, bands=1), True))
        if f == 0.5 or not quick:
            keys, rest = tt.rotary.kv_cache_split({"kv_cache": f, "bands": 2}, None, per_head)
            rows.append(("whitened SVD K+V", f, "low-rank", dict(key_values=keys, value_values=rest["value_dim"]),
                         True))
    return rows


def dtyped(options: dict) -> dict:
    """The options with cache_dtype's name (as results.json records it) as a torch dtype."""
    if "cache_dtype" not in options:
        return options
    return dict(options, cache_dtype=getattr(torch, options["cache_dtype"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for results.json (created)")
    ap.add_argument("--quick", action="store_true", help="fewer tokens, rows, lengths and repetitions")
    ap.add_argument("--speed-only", action="store_true",
                    help="prefill and decode speed of the default form at half the cache against the original "
                         "(dynamic and static cache) at 2,048, 4,096 and 8,192 tokens (--quick: 2,048 and 4,096); "
                         "weight-only conversion")
    ap.add_argument("--joint", action="store_true", help="with --speed-only: the joint latent (joint=True)")
    ap.add_argument("--cache-dtype", choices=("bfloat16", "float8_e4m3fn"),
                    help="with --speed-only: the cache stored in this dtype (cache_dtype=; the model converted in "
                         "float32)")
    ap.add_argument("--kv-cache", type=float, default=0.5,
                    help="with --speed-only: the fraction of the original's cache bytes (default 0.5)")
    ap.add_argument("--rows", nargs="+", metavar="TEXT",
                    help="only the converted rows whose label holds one of these (the original is always measured)")
    ap.add_argument("--device", default="cpu", help="with --speed-only: where the models run (cpu, cuda)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                    help="with --speed-only: the models' dtype")
    ap.add_argument("--lengths", type=int, nargs="+", help="with --speed-only: prefill lengths")
    ap.add_argument("--random-weights", action="store_true",
                    help="with --speed-only: SmolLM2-135M's shape with random weights, random tokens")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.speed_only:
        return speed_only(args)
    tok, model = rope.load()
    cfg = model.config
    per_head = cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads)
    window = 2048
    sources = held_out(tok, 4096 if args.quick else 25600, window)
    held = [w for windows in sources.values() for w in windows]
    prompts = [w[:, i : i + 64] for w in held for i in range(0, window - 64, 512)][: 20 if args.quick else 200]
    calib = calibration(tok, 8192)
    lengths = (2048,) if args.quick else (512, 2048, 8192)
    reps, steps, new = (3 if args.quick else 5), 32, 32
    text = torch.cat(held, dim=1)
    counts = {k: sum(w.shape[1] for w in v) for k, v in sources.items()}
    print(f"held-out tokens {counts}, windows {len(held)} x {window}, prompts {len(prompts)}, calibration tokens "
          f"{sum(c['input_ids'].shape[1] for c in calib)}, threads {torch.get_num_threads()}", flush=True)

    def measure(m, label, fraction, data, extra):
        by_source = {k: rope.perplexity(m, v) for k, v in sources.items()}
        # all windows: exp of the mean log-likelihood over every predicted token
        weights = {k: sum(w.shape[1] - 1 for w in v) for k, v in sources.items()}
        overall = math.exp(sum(weights[k] * math.log(p) for k, p in by_source.items()) / sum(weights.values()))
        row = {"label": label, "kv_fraction": fraction, "data_aware": data, **extra, "perplexity": overall,
               "perplexity_by_source": by_source, "speed": [], "original_speed": []}
        for n in lengths:  # alternating with the original (the original row: with its static cache)
            pair = speed([m, model], text[:, :n], steps, reps, static=m is model)
            row["speed"].append(pair[0])
            row["original_speed"].append(pair[0] if m is model else pair[1])
            if m is model:
                row.setdefault("static_cache_speed", []).append(pair[1])
        row["tokens"] = continuations(m, prompts, new)
        return row

    rows = [measure(model, "original", 1.0, False, {})]
    base = rows[0]["tokens"]
    for label, fraction, method, options, data in configurations(args.quick, per_head):
        if args.rows and not any(t in label for t in args.rows):
            continue
        m = copy.deepcopy(model)
        t = time.process_time()
        if method == "low-rank":
            low_rank.separate(m, calibration=calib if data else None, **options)
        else:
            tt.compress_model(m, calibration=calib if data else None, **dtyped(options))
        cpu = time.process_time() - t
        rows.append(measure(m, label, fraction, data, {"method": method, "options": options,
                                                       "conversion_cpu_s": cpu}))
        del m
    for row in rows:
        runs = []
        for x, y in zip(row.pop("tokens"), base):
            runs.append(float((x == y).long().cumprod(0).sum()) / len(y))
        row["agreement"] = sum(runs) / len(runs)
    base_ppl = rows[0]["perplexity"]
    result = {"model": rope.GGUF, "quick": args.quick, "heldout_tokens": counts, "window": window,
              "calibration_tokens": sum(c["input_ids"].shape[1] for c in calib), "threads": torch.get_num_threads(),
              "load": os.getloadavg(), "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "rows": rows}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    head = f"{'row':<22}{'KV':>5}{'data':>6}{'ppl':>8}{'vs orig':>9}{'licences':>10}{'docstrings':>11}{'agree':>7}"
    for n in lengths:
        head += f"{'bytes ' + str(n):>14}{'pre/s':>8}{'dec/s':>8}{'dec x':>7}"
    print(head)
    static = dict(rows[0], label="original, static cache", speed=rows[0]["static_cache_speed"])  # its speed only
    for r in rows[:1] + [static] + rows[1:]:
        line = (f"{r['label']:<22}{r['kv_fraction']:>5.2f}{str(r['data_aware']):>6}{r['perplexity']:>8.2f}"
                f"{100 * (r['perplexity'] / base_ppl - 1):>+8.1f}%")
        for k, width in zip(sources, (10, 11)):
            line += f"{100 * (r['perplexity_by_source'][k] / rows[0]['perplexity_by_source'][k] - 1):>+{width - 1}.1f}%"
        line += f"{r['agreement']:>7.2f}"
        for s, b in zip(r["speed"], r["original_speed"]):
            line += (f"{s['cache_bytes']:>14,}{s['prefill_tokens_per_s']:>8.0f}{s['decode_tokens_per_s']:>8.1f}"
                     f"{s['decode_tokens_per_s'] / b['decode_tokens_per_s']:>7.2f}")
        print(line)


if __name__ == "__main__":
    main()
