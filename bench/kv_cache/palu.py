"""The baseline of the KV-cache benchmark: low-rank keys and values by whitened SVD at
the same cache bytes (Palu, ICLR 2025, without its grouping and rank search; SVD-LLM's
whitening), put into tenfold.torch's converted attention layer so that it caches, reads
and is timed the same way as the rows it is compared with.

Per layer, with S the second moment of the attention inputs on the calibration text
(weight-only: plain SVDs):
  keys    W_K ~ B_K A_K (bench/rope's low_rank_factors): the cache holds c_K = A_K x
          (r_K values); every cached key is rebuilt as B_K c_K and rotated at read time;
  values  W_V ~ B_V A_V the same way (the value error, not the layer's output error): the
          cache holds c_V = A_V x (r_V values) and B_V folds into o_proj per head.
"""

from __future__ import annotations

import torch
from run import low_rank_factors  # bench/rope/run.py, on the path of bench/kv_cache/run.py

import tenfold.torch as tt
from tenfold.torch.rotary_attention import RotarySharedKeyAttention


def compress(model, key_values: int, value_values: int, calibration=None, damping: float = 0.01) -> None:
    """Replaces every attention layer of a Llama-family model (no key and value biases) in
    place by the low-rank K+V form: key_values + value_values cached per token and layer."""
    cfg = model.config
    heads, groups = cfg.num_attention_heads, cfg.num_key_value_heads
    layers = tt.rotary.rotary_layers(model)
    if any(m.k_proj.bias is not None or m.v_proj.bias is not None for _, m in layers):
        raise ValueError("the whitened-SVD baseline is written for attention without key and value biases")
    moments = tt.rotary.rotary_moments(model, layers, calibration, False) if calibration is not None else {}
    emb = model.model.rotary_emb
    built = {}
    for name, module in layers:
        d = module.head_dim
        s = moments[name][0] if moments else None
        a_k, b_k = low_rank_factors(module.k_proj.weight, key_values, s, damping)
        a_v, b_v = low_rank_factors(module.v_proj.weight, value_values, s, damping)
        # bands > 1 selects the layer's rebuild-and-rotate path; expand is dense here
        new = RotarySharedKeyAttention(module, key_values, heads, groups, d, False, cfg.model_type, 2, value_values)
        per_group = heads // groups
        w_o = module.o_proj.weight.detach().double()
        # head h's output columns times its value group's up-projection: (E, H r_V)
        out = torch.cat([w_o[:, h * d : (h + 1) * d] @ b_v[(h // per_group) * d : (h // per_group + 1) * d]
                         for h in range(heads)], dim=1)
        with torch.no_grad():
            new.key.weight.copy_(a_k)
            new.expand.copy_(b_k)
            new.inv_freq.copy_(emb.inv_freq.float())
            new.attention_scaling.fill_(float(getattr(emb, "attention_scaling", 1.0)))
            new.value.weight.copy_(a_v)
            new.o_proj.weight.copy_(out)
            if module.o_proj.bias is not None:
                new.o_proj.bias.copy_(module.o_proj.bias)
        built[name] = new
    for name, new in built.items():
        parent, child = name.rsplit(".", 1)
        setattr(model.get_submodule(parent), child, new)
