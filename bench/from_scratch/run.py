"""Small transformers trained from scratch with concatenated or collaborative
attention at shared query/key widths D_k in {H d, H d / 2, H d / 4, H d / 8}
(docs/from-scratch.md).

    python bench/from_scratch/run.py --task vit|lm [--quick] --out DIR
        [--threads 1] [--steps N] [--seeds 0,1,2] [--dks 64,32,16,8]
        [--data DIR] [--corpus FILE]

vit: a ViT on Fashion-MNIST (the idx files of Debian's dataset-fashion-mnist, under
/usr/share/datasets/fashion-mnist/ or --data), test accuracy. lm: a character-level
causal language model on the King James Bible (Debian's bible-kjv-text, read through
its `bible` program, or any plain text file given as --corpus), held-out perplexity
per character. Every row (attention kind, D_k, seed) has the same budget: steps,
batch, AdamW, warm-up and cosine schedule. A finished row is cached in DIR/rows/ and
not run again with the same settings; DIR/results.json is rewritten after every row.
--quick: seed 0 at D_k = H d and H d / 4. Rows run in that order: H d and H d / 4 for
every seed, then the other widths.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

import tenfold.torch as tt

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
# One budget per task, the same for every row. dim = H d: D_k = dim is full width.
CONFIGS = {
    "vit": dict(dim=64, heads=4, layers=2, mlp=128, patch=4, batch=64, steps=800, lr=2e-3, warmup=50),
    "lm": dict(dim=64, heads=4, layers=2, mlp=256, context=64, batch=32, steps=1000, lr=2e-3, warmup=50,
               eval_windows=2000),
}


class ConcatAttention(nn.Module):
    """Standard multi-head attention whose queries and keys are `qk_dim` wide in all
    (qk_dim / H a head), values H d = dim: the paper's concatenated baseline at
    D_k = qk_dim. Projections initialised as nn.Linear does, as in
    CollaborativeAttention; scaled_dot_product_attention, scale 1 / sqrt(qk_dim / H)."""

    def __init__(self, dim: int, heads: int, qk_dim: int):
        super().__init__()
        if qk_dim % heads:
            raise ValueError(f"--dks: {qk_dim} is not divisible by the {heads} heads")
        self.heads = heads
        self.query = nn.Linear(dim, qk_dim)
        self.key = nn.Linear(dim, qk_dim)
        self.value = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, is_causal: bool = False):
        b, n, _ = x.shape
        split = lambda t: t.view(b, n, self.heads, -1).transpose(1, 2)  # noqa: E731
        # softmax(q_h k_h^T / sqrt(qk_dim / H)) v_h for every head at once.
        out = nn.functional.scaled_dot_product_attention(
            split(self.query(x)), split(self.key(x)), split(self.value(x)), is_causal=is_causal)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, -1)), None


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(LN x), then x + MLP(LN x)."""

    def __init__(self, kind: str, dim: int, heads: int, dk: int, mlp: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = tt.CollaborativeAttention(dim, heads, dk) if kind == "collab" else ConcatAttention(dim, heads, dk)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), is_causal=causal)[0]
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    """Patches of 28 x 28 images, a class token, learned positions, pre-norm blocks."""

    def __init__(self, kind, dk, dim, heads, layers, mlp, patch, **_):
        super().__init__()
        self.patch = patch
        tokens = (28 // patch) ** 2 + 1
        self.embed = nn.Linear(patch * patch, dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, tokens, dim))
        self.blocks = nn.ModuleList(Block(kind, dim, heads, dk, mlp) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        p = self.patch
        b = images.shape[0]
        # (B, 28, 28) -> (B, 28/p * 28/p, p * p)
        patches = images.unfold(1, p, p).unfold(2, p, p).reshape(b, -1, p * p)
        x = torch.cat([self.cls.expand(b, -1, -1), self.embed(patches)], dim=1) + self.pos
        for block in self.blocks:
            x = block(x, causal=False)
        return self.head(self.norm(x[:, 0]))


class CharLM(nn.Module):
    """Character embeddings, learned positions, causal pre-norm blocks."""

    def __init__(self, kind, dk, dim, heads, layers, mlp, context, vocab, **_):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(1, context, dim))
        self.blocks = nn.ModuleList(Block(kind, dim, heads, dk, mlp) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) + self.pos[:, : ids.shape[1]]
        for block in self.blocks:
            x = block(x, causal=True)
        return self.head(self.norm(x))


def read_idx(path: Path) -> np.ndarray:
    """An idx file (gzipped or not): big-endian magic 0x0000 0x08 ndim, the sizes, bytes."""
    raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    if raw[:3] != b"\0\0\x08":
        raise ValueError(f"{path}: not an idx file of unsigned bytes")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def fashion_mnist(data: Path) -> dict:
    def part(prefix):
        find = lambda kind: next(iter(sorted(data.glob(f"{prefix}-{kind}-idx*"))), None)  # noqa: E731
        images, labels = find("images"), find("labels")
        if images is None or labels is None:
            raise SystemExit(f"--data: no {prefix}-images/labels idx files in {data} "
                             "(apt-get install dataset-fashion-mnist)")
        x = torch.from_numpy(read_idx(images).astype(np.float32) / 255.0)
        return (x - 0.2860) / 0.3530, torch.from_numpy(read_idx(labels).astype(np.int64))

    return {"train": part("train"), "test": part("t10k")}


def kjv_lines() -> list:
    """The verses of the King James Bible, one a line, without their references."""
    if shutil.which("bible") is None:
        raise SystemExit("the lm task reads the King James Bible through `bible` "
                         "(apt-get install bible-kjv bible-kjv-text), or give --corpus FILE")
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    return [re.sub(r"^\S+\d+:\d+\s+", "", line) for line in out.splitlines() if line.strip()]


def text_corpus(corpus: Path | None, context: int) -> dict:
    """Characters as ids; the lines in 100 consecutive blocks, every tenth held out."""
    lines = kjv_lines() if corpus is None else [ln for ln in corpus.read_text().splitlines() if ln.strip()]
    held = [(100 * i // len(lines)) % 10 == 9 for i in range(len(lines))]
    train = "\n".join(ln for ln, h in zip(lines, held) if not h)
    test = "\n".join(ln for ln, h in zip(lines, held) if h)
    if min(len(train), len(test)) <= context + 1:
        raise SystemExit(f"--corpus: too short for windows of {context + 1} characters in its training "
                         "and held-out parts")
    vocab = sorted(set(train) | set(test))
    index = {c: i for i, c in enumerate(vocab)}
    ids = lambda s: torch.tensor([index[c] for c in s], dtype=torch.int64)  # noqa: E731
    return {"train": ids(train), "test": ids(test), "vocab": len(vocab)}


def schedule(step: int, cfg: dict) -> float:
    """Linear warm-up, then cosine decay to zero: the factor on the learning rate."""
    if step < cfg["warmup"]:
        return (step + 1) / cfg["warmup"]
    return 0.5 * (1 + math.cos(math.pi * (step - cfg["warmup"]) / max(1, cfg["steps"] - cfg["warmup"])))


def windows(ids: torch.Tensor, starts: torch.Tensor, context: int) -> tuple:
    rows = ids[starts.unsqueeze(1) + torch.arange(context + 1)]
    return rows[:, :-1], rows[:, 1:]


def train_row(task: str, kind: str, dk: int, seed: int, cfg: dict, data: dict, desc: str) -> dict:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = ViT(kind, dk, **cfg) if task == "vit" else CharLM(kind, dk, vocab=data["vocab"], **cfg)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule(s, cfg))
    loss_fn = nn.CrossEntropyLoss()
    start = time.perf_counter()
    model.train()
    bar = tqdm(range(cfg["steps"]), desc=desc, file=sys.stderr, mininterval=2.0, leave=False)
    for _ in bar:
        if task == "vit":
            pick = torch.randint(len(data["train"][1]), (cfg["batch"],), generator=gen)
            x, y = data["train"][0][pick], data["train"][1][pick]
            loss = loss_fn(model(x), y)
        else:
            starts = torch.randint(len(data["train"]) - cfg["context"] - 1, (cfg["batch"],), generator=gen)
            x, y = windows(data["train"], starts, cfg["context"])
            loss = loss_fn(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        if task == "vit":
            x, y = data["test"]
            correct = sum(int((model(xb).argmax(1) == yb).sum()) for xb, yb in zip(x.split(500), y.split(500)))
            metric, value = "accuracy", correct / len(y)
        else:
            # Perplexity per character over evenly spaced held-out windows (all positions).
            count = min(cfg["eval_windows"], (len(data["test"]) - 1) // cfg["context"])
            starts = torch.linspace(0, len(data["test"]) - cfg["context"] - 1, count).long()
            total = 0.0
            for chunk in starts.split(250):
                x, y = windows(data["test"], chunk, cfg["context"])
                total += float(nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum"))
            metric, value = "perplexity", math.exp(total / (count * cfg["context"]))
    return {"attention": kind, "dk": dk, "seed": seed, "metric": metric, "value": value, "params": params,
            "seconds": round(seconds, 2)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true", help="seed 0 at D_k = H d and H d / 4")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--dks", default=None, help="comma-separated D_k (default H d, H d/2, H d/4, H d/8)")
    ap.add_argument("--steps", type=int, default=None, help="training steps a row (default: the task's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", type=Path, default=FASHION_MNIST, help="Fashion-MNIST idx directory (vit)")
    ap.add_argument("--corpus", type=Path, default=None, help="plain text instead of the King James Bible (lm)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = dict(CONFIGS[args.task])
    if args.steps is not None:
        if args.steps < 1:
            ap.error(f"--steps must be >= 1, got {args.steps}")
        cfg["steps"] = args.steps
        cfg["warmup"] = min(cfg["warmup"], max(1, args.steps // 10))
    full = cfg["dim"]
    dks = [full, full // 2, full // 4, full // 8] if args.dks is None else [int(v) for v in args.dks.split(",")]
    seeds = [int(v) for v in args.seeds.split(",")]
    if args.quick:
        dks, seeds = [full, full // 4], [0]
    bad = [dk for dk in dks if not 1 <= dk <= full]
    if bad:
        ap.error(f"--dks: {bad[0]} is outside [1, {full}]")
    if args.task == "lm" and args.corpus is not None and not args.corpus.is_file():
        ap.error(f"--corpus: {args.corpus} is not a file")
    # The paper's comparison (H d against H d / 4) for every seed first, then the other
    # widths seed by seed: a sweep stopped early has the comparison.
    first = [dk for dk in dks if dk in (full, full // 4)]
    plan = [(kind, dk, seed) for group in (first, [dk for dk in dks if dk not in first])
            for seed in seeds for dk in group for kind in ("concat", "collab")]
    rows_dir = args.out / "rows"
    rows_dir.mkdir(parents=True, exist_ok=True)
    setting = {"task": args.task, "config": cfg, "corpus": str(args.corpus or "kjv"),
               "data": str(args.data) if args.task == "vit" else None}
    data = None
    rows = []
    for i, (kind, dk, seed) in enumerate(plan):
        path = rows_dir / f"{args.task}-{kind}-dk{dk}-seed{seed}.json"
        cached = json.loads(path.read_text()) if path.is_file() else None
        if cached is None or cached.get("setting") != setting:
            if data is None:
                data = fashion_mnist(args.data) if args.task == "vit" else text_corpus(args.corpus, cfg["context"])
            row = train_row(args.task, kind, dk, seed, cfg, data, f"[{i + 1}/{len(plan)}] {kind} dk={dk} seed={seed}")
            path.write_text(json.dumps({"setting": setting, "row": row}))
            print(json.dumps(row), file=sys.stderr, flush=True)
        else:
            row = cached["row"]
        rows.append(row)
        result = {"task": args.task, "config": cfg, "threads": args.threads, "rows": rows}
        (args.out / "results.json").write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
