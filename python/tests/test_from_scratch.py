"""bench/from_scratch/run.py end to end on tiny data (seconds): both tasks train,
evaluate and write results.json in the documented form, and a second run with the
same settings reuses the cached rows while changed settings train again."""

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("tqdm")

RUN = Path(__file__).resolve().parents[2] / "bench" / "from_scratch" / "run.py"


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("from_scratch_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def fashion(tmp_path):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 40), ("t10k", 12)):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))
    return tmp_path


def test_idx_reader_round_trips(run, tmp_path):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a-idx3-ubyte.gz", a)
    np.testing.assert_array_equal(run.read_idx(tmp_path / "a-idx3-ubyte.gz"), a)


def check_rows(result, metric, order):
    """`order`: the (D_k, seed) pairs in the order the rows ran, concat before collab."""
    rows = result["rows"]
    assert [(r["attention"], r["dk"], r["seed"]) for r in rows] == [
        (kind, dk, seed) for dk, seed in order for kind in ("concat", "collab")]
    for r in rows:
        assert r["metric"] == metric and r["params"] > 0 and r["seconds"] > 0
    by = {(r["attention"], r["dk"]): r["params"] for r in rows}
    # Narrower queries and keys, fewer parameters, for both kinds.
    wide, narrow = max(dk for dk, _ in order), min(dk for dk, _ in order)
    assert by["concat", narrow] < by["concat", wide] and by["collab", narrow] < by["collab", wide]


def test_vit_pipeline_and_resume(run, fashion, tmp_path):
    out = tmp_path / "out"
    args = ["--task", "vit", "--out", str(out), "--data", str(fashion), "--steps", "2", "--seeds", "0",
            "--dks", "16,4"]
    result = run.main(args)
    check_rows(result, "accuracy", [(16, 0), (4, 0)])
    assert all(0 <= r["value"] <= 1 for r in result["rows"])
    assert json.loads((out / "results.json").read_text())["rows"] == result["rows"]
    # Same settings: every row comes from the cache (same recorded seconds).
    assert run.main(args)["rows"] == result["rows"]
    # Another budget: trained again.
    again = run.main(args[:-4] + ["--steps", "3", "--seeds", "0", "--dks", "16,4"])
    assert [r["seconds"] for r in again["rows"]] != [r["seconds"] for r in result["rows"]]


def test_lm_pipeline(run, tmp_path):
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(1)
    words = ["and", "the", "light", "was", "good", "in", "beginning", "earth"]
    corpus.write_text("\n".join(" ".join(rng.choice(words, 12)) for _ in range(300)))
    result = run.main(["--task", "lm", "--out", str(tmp_path / "lm"), "--corpus", str(corpus), "--steps", "2",
                       "--seeds", "0,1", "--dks", "64,8,16"])
    # H d and H d / 4 for every seed first, then the other widths.
    check_rows(result, "perplexity", [(64, 0), (16, 0), (64, 1), (16, 1), (8, 0), (8, 1)])
    vocab = len(set(corpus.read_text()))
    # Two steps from a random start: near the uniform guess over the vocabulary.
    assert all(1 < r["value"] < 3 * vocab for r in result["rows"])


def test_bad_arguments_are_refused(run, tmp_path, capsys):
    with pytest.raises(SystemExit):
        run.main(["--task", "vit", "--out", str(tmp_path), "--dks", "128"])
    assert "--dks: 128 is outside [1, 64]" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no train-images/labels idx files"):
        run.main(["--task", "vit", "--out", str(tmp_path), "--data", str(tmp_path), "--steps", "1"])
