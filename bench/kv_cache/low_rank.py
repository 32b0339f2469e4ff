"""Low-rank keys and values by whitened SVD, put into tenfold.torch's converted attention
layer so that they cache, read and are timed the same way as the rows they are compared
with in the KV-cache benchmark.

`separate`, the baseline (Palu, ICLR 2025, without its grouping and rank search;
SVD-LLM's whitening): per layer, with S the second moment of the attention inputs on the
calibration text (weight-only: plain SVDs),
  keys    W_K ~ B_K A_K (bench/rope's low_rank_factors): the cache holds c_K = A_K x
          (r_K values); every cached key is rebuilt as B_K c_K and rotated at read time;
  values  W_V ~ B_V A_V the same way (the value error, not the layer's output error): the
          cache holds c_V = A_V x (r_V values) and B_V folds into o_proj per head.
`joint`, one latent for both (as latent attention, MLA): [W_K; W_V] ~ [B_K; B_V] A, the
key and value rows scaled to equal whitened energy, the cache holding c = A x once.
"""

from __future__ import annotations

import torch
from run import low_rank_factors  # bench/rope/run.py, on the path of bench/kv_cache/run.py

import tenfold.torch as tt
from tenfold.torch.rotary_attention import RotarySharedKeyAttention


def _layer(model, module, a_k, b_k, a_v, b_v):
    """The converted layer caching c_K = A_K x and c_V = A_V x, keys rebuilt as B_K c_K and
    rotated, B_V folded into o_proj per head or applied before the original o_proj, as the
    layer chooses (value_expansion_folded)."""
    cfg, emb = model.config, model.model.rotary_emb
    heads, groups, d = cfg.num_attention_heads, cfg.num_key_value_heads, module.head_dim
    # bands > 1 selects the layer's rebuild-and-rotate path; expand is dense here
    new = RotarySharedKeyAttention(module, a_k.shape[0], heads, groups, d, False, cfg.model_type, 2, a_v.shape[0])
    per_group = heads // groups
    with torch.no_grad():
        new.key.weight.copy_(a_k)
        new.expand.copy_(b_k)
        new.inv_freq.copy_(emb.inv_freq.float())
        new.attention_scaling.fill_(float(getattr(emb, "attention_scaling", 1.0)))
        new.value.weight.copy_(a_v)
        if not new.folded:  # the original o_proj after each head's B_V
            new.value_expand.copy_(b_v)
            return new
        # head h's output columns times its value group's up-projection: (E, H r_V)
        w_o = module.o_proj.weight.detach().double()
        out = torch.cat([w_o[:, h * d : (h + 1) * d] @ b_v[(h // per_group) * d : (h // per_group + 1) * d]
                         for h in range(heads)], dim=1)
        new.o_proj.weight.copy_(out)
        if module.o_proj.bias is not None:
            new.o_proj.bias.copy_(module.o_proj.bias)
    return new


def _convert(model, calibration, factors) -> None:
    """Every attention layer (no key and value biases) replaced in place by _layer of
    factors(module, moment or None) = (A_K, B_K, A_V, B_V)."""
    layers = tt.rotary.rotary_layers(model)
    if any(m.k_proj.bias is not None or m.v_proj.bias is not None for _, m in layers):
        raise ValueError("the low-rank forms are written for attention without key and value biases")
    moments = tt.rotary.rotary_moments(model, layers, calibration, False) if calibration is not None else {}
    built = {name: _layer(model, module, *factors(module, moments[name][0] if moments else None))
             for name, module in layers}
    for name, new in built.items():
        parent, child = name.rsplit(".", 1)
        setattr(model.get_submodule(parent), child, new)


def separate(model, key_values: int, value_values: int, calibration=None, damping: float = 0.01) -> None:
    """The low-rank K+V form: key_values + value_values cached per token and layer."""

    def factors(module, s):
        return (*low_rank_factors(module.k_proj.weight, key_values, s, damping),
                *low_rank_factors(module.v_proj.weight, value_values, s, damping))

    _convert(model, calibration, factors)


def joint(model, values: int, calibration=None, damping: float = 0.01) -> None:
    """One latent of `values` per token and layer for keys and values (held twice by the
    converted layer's cache: a perplexity probe, not a cache-size measurement)."""

    def factors(module, s):
        w_k, w_v = module.k_proj.weight.detach().double(), module.v_proj.weight.detach().double()
        # equal whitened energy: the norms of W L, with the damped Cholesky factor L of S
        a, b = low_rank_factors(torch.cat([w_k, w_v]), w_k.shape[0] + w_v.shape[0], s, damping)
        scale_k, scale_v = 1 / (b[: w_k.shape[0]].norm()), 1 / (b[w_k.shape[0] :].norm())
        a, b = low_rank_factors(torch.cat([w_k * scale_k, w_v * scale_v]), values, s, damping)
        return a, b[: w_k.shape[0]] / scale_k, a, b[w_k.shape[0] :] / scale_v

    _convert(model, calibration, factors)


def reading_keys(model, key_values: int, value_values: int, calibration, damping: float = 0.01) -> None:
    """Shared rotary keys (bands = 1, data-aware: key_values per token and layer) whose
    values are read from the unrotated key latent z_K plus value_values more latent values
    z_V: per layer, with S = L L^T the damped moment of the attention inputs, v_proj becomes
    its best approximation on the rows of [z_K; z_V] in E||W_O (v - v~)||^2,
      W_V~ = W_V L P L^-1,  P = Q_K Q_K^T + V V^T,
    Q_K an orthonormal basis of (A_K L)^T (A_K: the layer's key map), V the top value_values
    right singular vectors of F (W_V L - W_V L Q_K Q_K^T), F the square roots of each value
    group's sum of W_O^h^T W_O^h. A perplexity probe: the layer still caches whole values."""
    layers = tt.rotary.rotary_layers(model)
    moments = tt.rotary.rotary_moments(model, layers, calibration, False)
    tt.compress_model(model, key_values, calibration=calibration)
    cfg = model.config
    heads, groups, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    per_group = heads // groups
    for name, (s, _) in moments.items():
        layer = model.get_submodule(name)
        dim = s.shape[0]
        chol = torch.linalg.cholesky(s + damping * torch.trace(s) / dim * torch.eye(dim, dtype=s.dtype))
        a = layer.v_proj.weight.detach().double() @ chol
        q_k, _ = torch.linalg.qr((layer.key.weight.detach().double() @ chol).T)
        on_keys = (a @ q_k) @ q_k.T
        w_o = layer.o_proj.weight.detach().double()
        roots = []
        for g in range(groups):
            heads_g = range(g * per_group, (g + 1) * per_group)
            e, u = torch.linalg.eigh(sum(w_o[:, h * d : (h + 1) * d].T @ w_o[:, h * d : (h + 1) * d] for h in heads_g))
            roots.append((u * e.clamp(min=0).sqrt()) @ u.T)
        _, _, vh = torch.linalg.svd(torch.block_diag(*roots) @ (a - on_keys), full_matrices=False)
        extra = vh[:value_values].T
        approx = on_keys + (a @ extra) @ extra.T
        with torch.no_grad():
            layer.v_proj.weight.copy_(torch.linalg.solve_triangular(chol, approx, upper=False, left=False))
