"""Small random models of every family tenfold.torch converts, their inputs (with
padding), and the exact full-rank collaborative tensors computed in NumPy straight
from each family's weights (independently of the package)."""

import numpy as np
import torch
import transformers as tr

HEADS = 4
DIM = 32


def _perturb(model, seed):
    # Default initialisation zeroes the biases; random ones exercise the content term.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model.eval()


def make_model(family, attn_implementation="sdpa", seed=0, **config):
    """A small random model of the family; `config` sets further config attributes."""
    torch.manual_seed(seed)
    common = dict(num_hidden_layers=2, num_attention_heads=HEADS, hidden_size=DIM, intermediate_size=37,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if family == "bert":
        cfg, cls = tr.BertConfig(vocab_size=99, max_position_embeddings=64, **common), tr.BertModel
    elif family == "roberta":
        cfg, cls = tr.RobertaConfig(vocab_size=99, max_position_embeddings=64, pad_token_id=1, **common), tr.RobertaModel
    elif family == "distilbert":
        cfg = tr.DistilBertConfig(vocab_size=99, dim=DIM, n_layers=2, n_heads=HEADS, hidden_dim=37,
                                  max_position_embeddings=64, dropout=0.0, attention_dropout=0.0)
        cls = tr.DistilBertModel
    elif family == "albert":
        cfg = tr.AlbertConfig(vocab_size=99, embedding_size=16, max_position_embeddings=64, **{**common,
                              "num_hidden_layers": 3})
        cls = tr.AlbertModel
    elif family in ("vit", "deit"):
        kw = dict(image_size=16, patch_size=4, num_channels=3, **common)
        cfg, cls = (tr.ViTConfig(**kw), tr.ViTModel) if family == "vit" else (tr.DeiTConfig(**kw), tr.DeiTModel)
    elif family == "gpt2":
        cfg = tr.GPT2Config(vocab_size=99, n_positions=64, n_embd=DIM, n_layer=2, n_head=HEADS,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        cls = tr.GPT2LMHeadModel
    else:
        raise KeyError(family)
    cfg._attn_implementation = attn_implementation
    for key, value in config.items():
        setattr(cfg, key, value)
    return _perturb(cls(cfg), seed)


def make_inputs(family, seed=1):
    g = torch.Generator().manual_seed(seed)
    if family in ("vit", "deit"):
        return {"pixel_values": torch.randn(2, 3, 16, 16, generator=g)}
    ids = torch.randint(3, 99, (2, 7), generator=g)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 4:] = 0  # the second sequence is padded
    return {"input_ids": ids, "attention_mask": mask}


def qk_weights(model, family):
    """name -> (W_Q (Hd, D), W_K (Hd, D), b_Q (Hd)) in float64, read per family."""
    out = {}
    for name, m in model.named_modules():
        cls = type(m).__name__
        if family == "gpt2" and cls == "GPT2Attention":
            w, b = m.c_attn.weight.detach().double().numpy(), m.c_attn.bias.detach().double().numpy()
            out[name] = (w[:, :DIM].T, w[:, DIM:2 * DIM].T, b[:DIM])
        elif cls in ("BertSelfAttention", "RobertaSelfAttention", "AlbertAttention"):
            out[name] = (m.query.weight.detach().double().numpy(), m.key.weight.detach().double().numpy(), m.query.bias.detach().double().numpy())
        elif cls == "DistilBertSelfAttention":
            out[name] = (m.q_lin.weight.detach().double().numpy(), m.k_lin.weight.detach().double().numpy(), m.q_lin.bias.detach().double().numpy())
        elif cls in ("ViTAttention", "DeiTAttention"):
            out[name] = (m.q_proj.weight.detach().double().numpy(), m.k_proj.weight.detach().double().numpy(),
                         m.q_proj.bias.detach().double().numpy())
    return out


def exact_tensors(wq, wk, bq, heads=HEADS):
    """The exact full-rank collaborative form (docs/attention.md): block-of-ones
    mixing times 1/sqrt(d), the stacked head projections, v_h = W_K^h b_Q^h / sqrt(d)."""
    dk, dim = wq.shape
    d = dk // heads
    mixing = np.kron(np.eye(heads), np.ones((1, d))) / np.sqrt(d)
    content = np.stack([wk[h * d:(h + 1) * d].T @ bq[h * d:(h + 1) * d] for h in range(heads)]) / np.sqrt(d)
    return {"collab.mixing": mixing, "collab.query.weight": wq, "collab.key.weight": wk,
            "collab.content_bias.weight": content}


def run(model, inputs):
    with torch.no_grad():
        out = model(**inputs)
    return out.logits if hasattr(out, "logits") and out.logits is not None else out.last_hidden_state


#: The rotary families tenfold.torch converts, and Qwen3 (QK-norm, refused).
ROTARY_CLASSES = {
    "llama": (tr.LlamaConfig, tr.LlamaForCausalLM),
    "qwen2": (tr.Qwen2Config, tr.Qwen2ForCausalLM),
    "mistral": (tr.MistralConfig, tr.MistralForCausalLM),
    "qwen3": (tr.Qwen3Config, tr.Qwen3ForCausalLM),
}


def rotary_model(family, *, head_dim, heads=HEADS, key_heads=2, impl="sdpa", seed=0, vocab=64, **config):
    """A two-layer rotary model of the family (width DIM) with random weights large enough
    that the attention is far from uniform (initializer_range 0.3); Qwen2's query/key
    biases random too."""
    config_class, model_class = ROTARY_CLASSES[family]
    cfg = config_class(vocab_size=vocab, hidden_size=DIM, intermediate_size=2 * DIM, num_hidden_layers=2,
                       num_attention_heads=heads, num_key_value_heads=key_heads, head_dim=head_dim,
                       max_position_embeddings=256, initializer_range=0.3, attn_implementation=impl, **config)
    torch.manual_seed(seed)
    model = model_class(cfg).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                if proj.bias is not None:
                    proj.bias.normal_()
    return model
