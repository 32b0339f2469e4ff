"""Rotary (RoPE) attention with shared complex keys (docs/rope.md).

With RoPE, query head h (key head g = g(h)) scores position m against position n as

    s_h(m, n) = scale * sum_j Re(e^{i theta_j (m - n)} q_{h,j}(x) conj(k_{g,j}(y)))

over the d/2 frequency pairs j, with q_{h,j}(x) = u_{h,j}^T [x; 1] and
k_{g,j}(y) = w_{g,j}^T [y; 1] the complex numbers formed by pair j's two coordinates
(the trailing 1 carries the biases). A complex factor commutes with the rotation, so
per frequency the keys of all key heads can come from R_j shared complex keys,

    k_{g,j}(y) ~ sum_r c_{g,r} kappa_r(y),   kappa_r(y) = e_r^T [y; 1]   (r of frequency j),

and the cache stores the rotated kappa_r (2 sum_j R_j real numbers per token and
layer) instead of the G d original keys. The query of head h meets them after a
per-head complex mixing: q~_{h,r} = q_{h,j}(x) e^{i theta_j m} conj(c_{g(h),r}).
The best e, c for a budget is a (whitened, query-weighted) complex SVD per frequency,
exact when R_j is the rank of [w_{1,j} ... w_{G,j}] (at most G: the original cache).

With bands of b > 1 adjacent frequencies (``bands=b``), each band's 2 G b key rows are
rebuilt from a real latent of its own, cached unrotated and rotated after the rebuild:
exact at the rank of the band's keys, and the best latent for the phase-averaged logit
error is again an SVD per band.

Both forms are solved by the library (tenfold::attention::rotary_keys, the solver the
program's ``tenfold attention rotary`` runs); this module finds the layers, gathers the
calibration moments and swaps in RotarySharedKeyAttention.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .. import _tenfold, _validate, attention
from ._cache_dtype import CACHE_DTYPES, cache_widening
from ._calibration import divergence, leading_prefixes, log_probs, moment_sums
from ._checkpoint import read_checkpoint
from ._swap import swap, swapped
from .rotary_attention import RotarySharedKeyAttention

_FAMILIES = _tenfold.rotary_families()  # the library's list, shared with the program
#: model_type -> the attention class the converter replaces.
ROTARY_FAMILIES: dict = _FAMILIES["converted"]
#: Families that normalise queries and keys per head before the rotation (QK-norm).
QK_NORM_FAMILIES: tuple = tuple(_FAMILIES["qk_norm"])
#: The keys' share of a kv_cache budget (the rest: latent values), the library's
#: (tenfold::attention::kKvKeyShare, docs/kv-cache.md, "One budget").
KV_KEY_SHARE = _tenfold.KV_KEY_SHARE
#: The config attribute that marks a model converted to shared rotary keys.
ROTARY_CONFIG_KEY = "tenfold_rotary"
#: joint=True, key_weighting="auto" with calibration: the candidates tried ("none": keys
#: and values at equal energy; a number: keys weighted by the queries, that emphasis) and
#: the calibration tokens their losses are measured on (docs/kv-cache.md).
KEY_WEIGHTINGS = ("none", 2.5)
KEY_WEIGHTING_TOKENS = 1024
#: RoPE types whose frequencies do not change with the sequence length: bands of
#: several frequencies rotate the rebuilt keys with the model's inv_freq.
STATIC_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def _qk_norm_reason(name: str) -> str:
    return (f"{name}: its attention normalises every query and key head (q_norm, k_norm: an RMSNorm) "
            "before the rotation, so a key is not a linear function of the token and no shared linear key "
            "projection reproduces it; tenfold.torch converts rotary attention without QK-norm "
            f"({', '.join(ROTARY_FAMILIES)})")


def is_rotary(model: nn.Module) -> bool:
    """True for the rotary families that compress_model converts here; raises for
    rotary families it refuses (QK-norm), False for everything else."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type in QK_NORM_FAMILIES:
        raise ValueError(_qk_norm_reason(f"{type(model).__name__} (model_type {model_type!r})"))
    return model_type in ROTARY_FAMILIES


@dataclass
class RotaryKeys:
    """One layer's shared rotary keys (float64 tensors; C values cached per token).

    ``key_weight`` (C, D) and ``key_bias`` (C,) or None (present when the query or the
    key side has a bias): the cached values from the token; ``expand`` (G d, C): the key
    coordinates rebuilt from them (zero outside each value's band); for ``bands == 1``
    also ``mixing`` (G, C/2, 2), the complex c_{g,r}, and ``frequency`` (C/2,), the pair
    j of each complex key (None for bands > 1); ``ranks``: components per band (complex
    keys per pair for bands == 1, latent values else); ``relative_error``: the square root
    of the objective's relative value, weight-only; ``data_error``: the same on the
    undamped calibration moments (None without them); ``singular_values`` (bands, k): sigma
    of each band's weighted, whitened keys (zero for "full", which takes the plain SVD);
    ``decode_flops``: score flops per cached token; ``params_before`` / ``params_after``:
    the q_proj and k_proj parameters, then q_proj, the key and the mixing or rebuild."""

    key_weight: torch.Tensor
    key_bias: torch.Tensor | None
    expand: torch.Tensor
    mixing: torch.Tensor | None
    frequency: torch.Tensor | None
    ranks: torch.Tensor
    relative_error: float
    data_error: float | None
    singular_values: torch.Tensor
    decode_flops: int
    params_before: int
    params_after: int


def _array(t) -> np.ndarray | None:
    return None if t is None else torch.as_tensor(t).detach().to(torch.float64).cpu().numpy()


def rotary_keys(query_weight: torch.Tensor, query_bias: torch.Tensor | None, key_weight: torch.Tensor,
                key_bias: torch.Tensor | None, *, heads: int, key_heads: int, key_values, bands: int = 1,
                inv_freq: torch.Tensor | None = None, context: int = 2048, query_moment=None, key_moment=None,
                damping: float = 0.01) -> RotaryKeys:
    """The shared rotary keys of one layer, computed by the library's solver
    (tenfold::attention::rotary_keys, the one the program runs) from PyTorch (out, in)
    weights; moments, when given, are the (D', D') second moments of [x; 1], D' = D + 1
    with biases, D without.

    `key_values`: the values cached per token (even for bands == 1: two per complex key),
    "full" for the smallest exact size, or a sequence of the components per band.
    ``bands == 1``: per frequency pair j, complex keys shared by all key heads, weighted
    by each pair's query energy and whitened by the key moment (damped by `damping`);
    ``bands > 1``: a real latent per band of `bands` adjacent pairs, rebuilt into the
    band's keys and rotated after the rebuild, weighted by the queries' coherence over
    the offsets of a `context`-token sequence (`inv_freq`: the model's RoPE
    frequencies). docs/rope.md derives both objectives; each minimiser is an SVD per band."""
    bands = _validate.integer(bands, "bands")
    ranks: list = []
    if isinstance(key_values, str):
        if key_values != "full":
            raise ValueError(f"key_values must be 'full', an integer or a sequence of ranks, got {key_values!r}")
        count = 0
    elif _validate.is_integer(key_values):
        count = int(key_values)
        if count < 1:
            raise ValueError(f"key_values must be 'full' or a positive integer, got {key_values!r}")
    else:
        ranks = [_validate.integer(r, "ranks") for r in key_values]
        count = 0
    freq = [] if inv_freq is None else [float(f) for f in torch.as_tensor(inv_freq).detach().cpu().double()]
    r = _tenfold.rotary_keys(_array(query_weight), _array(query_bias), _array(key_weight), _array(key_bias),
                             heads=heads, key_heads=key_heads, key_values=count, ranks=ranks, bands=bands,
                             inv_freq=freq, context=_validate.integer(context, "context"),
                             damping=_validate.nonnegative(damping, "damping"),
                             query_moment=_array(query_moment), key_moment=_array(key_moment))
    weight = torch.from_numpy(r["key_weight"])
    biased = query_bias is not None or key_bias is not None
    shared = len(r["frequency"])
    return RotaryKeys(
        key_weight=weight[:, :-1] if biased else weight,
        key_bias=weight[:, -1] if biased else None,
        expand=torch.from_numpy(r["expand"]),
        mixing=torch.from_numpy(r["mixing"]).view(key_heads, 2, shared).permute(0, 2, 1) if bands == 1 else None,
        frequency=torch.tensor(r["frequency"], dtype=torch.long) if bands == 1 else None,
        ranks=torch.tensor(r["ranks"], dtype=torch.long),
        relative_error=r["relative_error"],
        data_error=r["data_error"],
        singular_values=torch.from_numpy(r["singular_values"]),
        decode_flops=r["decode_flops"],
        params_before=r["params_before"],
        params_after=r["params_after"],
    )


def rotary_layers(model: nn.Module) -> list:
    """The (name, module) of every rotary attention layer of a supported model, each
    checked against the shapes the conversion relies on."""
    config = model.config
    family = config.model_type
    cls = ROTARY_FAMILIES[family]
    where = f"{type(model).__name__} ({family})"
    impl = getattr(config, "_attn_implementation", None)
    if impl not in (None, "eager", "sdpa"):
        raise ValueError(f"{where}: attention implementation {impl!r} is not supported; use "
                         "model.set_attn_implementation('sdpa') or 'eager' first")
    if float(getattr(config, "partial_rotary_factor", 1.0) or 1.0) != 1.0:
        raise ValueError(f"{where}: partial rotary embeddings (partial_rotary_factor "
                         f"{config.partial_rotary_factor}) are not supported")
    heads, key_heads = config.num_attention_heads, config.num_key_value_heads
    if heads % key_heads:
        raise ValueError(f"{where}: {heads} query heads are not a multiple of {key_heads} key heads")
    found = []
    for name, module in model.named_modules():
        if isinstance(module, RotarySharedKeyAttention):
            raise ValueError(f"{name} ({family}) already has shared rotary keys")
        if type(module).__name__ != cls:
            continue
        if getattr(module, "q_norm", None) is not None or getattr(module, "k_norm", None) is not None:
            raise ValueError(_qk_norm_reason(f"{name} ({family})"))
        parts = [getattr(module, p, None) for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
        if not all(isinstance(p, nn.Linear) for p in parts):
            raise ValueError(f"{name} ({cls}): expected nn.Linear q_proj, k_proj, v_proj and o_proj; this attention "
                             "module differs from the one the converter knows (another transformers version?)")
        d = module.head_dim
        dim = parts[0].in_features
        if d % 2 or parts[0].weight.shape != (heads * d, dim) or parts[1].weight.shape != (key_heads * d, dim):
            raise ValueError(f"{name} ({cls}): q_proj {tuple(parts[0].weight.shape)} and k_proj "
                             f"{tuple(parts[1].weight.shape)} do not fit {heads} query heads, {key_heads} key heads "
                             f"of even width {d}")
        found.append((name, module))
    if not found:
        raise ValueError(f"{where}: no attention module of class {cls} found")
    return found


def rotary_moments(model: nn.Module, layers: list, calibration: Iterable, biases: bool) -> dict:
    """Per layer: (E[x' x'^T] as float64 (D', D'), token count) of the attention inputs
    x' = [x; 1] (just x when `biases` is False) over the calibration batches, padding
    excluded when a batch has an attention_mask."""
    return moment_sums(model, layers, calibration, append_one=biases)


def _rope_frequencies(model: nn.Module, where: str) -> tuple[torch.Tensor, float]:
    """inv_freq and attention_scaling of the model's rotary embedding, refused when
    its frequencies change with the sequence length."""
    emb = getattr(getattr(model, "model", None), "rotary_emb", None)
    if emb is None or not isinstance(getattr(emb, "inv_freq", None), torch.Tensor):
        raise ValueError(f"{where}: no model.rotary_emb.inv_freq found; bands > 1 rotate rebuilt keys with it")
    kind = getattr(emb, "rope_type", "default")
    if kind not in STATIC_ROPE_TYPES:
        raise ValueError(f"{where}: RoPE type {kind!r} changes its frequencies with the sequence length; bands > 1 "
                         f"support {', '.join(STATIC_ROPE_TYPES)}")
    return emb.inv_freq.detach().float().cpu(), float(getattr(emb, "attention_scaling", 1.0))


def kv_cache_split(options: dict, shared_dim, original: int) -> tuple[int, dict]:
    """shared_dim and the options with value_dim for `kv_cache` = f, the fraction of the
    original key and value cache per token (2 G d values per layer, `original` = G d), split
    by the library (tenfold::attention::kv_cache_split, which the program's --kv-cache runs):
    KV_KEY_SHARE of the 2 f G d values keys (even for bands == 1), the rest latent values (the
    same in every layer; keys pooled over layers with allocation="model"). With `joint`, the
    2 f G d values are one latent (shared_dim) and value_dim stays unset."""
    f = options["kv_cache"]
    if isinstance(f, bool) or not isinstance(f, (int, float)):
        raise ValueError(f"kv_cache must be a fraction in (0, 1] of the original key and value cache, got {f!r}")
    if shared_dim is not None or options.get("value_dim") is not None:
        raise ValueError("kv_cache sets both shared_dim and value_dim: give kv_cache alone")
    joint = options.get("joint", False)
    keys, values = _tenfold.kv_cache_split(float(f), original,
                                           2 if joint else _validate.integer(options.get("bands", 1), "bands"))
    rest = {k: v for k, v in options.items() if k != "kv_cache"}
    if joint:
        return keys + values, rest
    rest["value_dim"] = values
    return keys, rest


def _copy_value_rebuild(new: RotarySharedKeyAttention, v: dict, module: nn.Module) -> None:
    """The values' rebuild of a value_latent result `v` into the new layer: the folded o_proj
    (with the original o_proj's bias) or value_expand before the original o_proj."""
    if new.folded:
        new.o_proj.weight.copy_(torch.from_numpy(v["output"]))
        if module.o_proj.bias is not None:
            new.o_proj.bias.copy_(module.o_proj.bias)
    else:
        new.value_expand.copy_(torch.from_numpy(v["expand"]))


def compress_rotary(model: nn.Module, shared_dim=None, calibration: Iterable | None = None, **options) -> list:
    """compress_model for rotary models (Llama, Qwen2, Mistral): replaces every
    attention layer in place by RotarySharedKeyAttention. `shared_dim`: "full" (the
    smallest exact size) or the number of key values cached per token and layer (at
    most the original G d; even for bands == 1: two per complex key). `calibration`
    (batches of model inputs) makes the objective data-aware. Options: `bands`
    (adjacent frequency pairs sharing keys, default 1; a divisor of d/2), `context`
    (bands > 1: the sequence length whose query-key offsets the objective averages,
    default 2048), `damping` (of the key-side moment, default 0.01) and `allocation`:
    "layer" (default: every layer caches `shared_dim` values) or "model" (`shared_dim`
    key values per layer on average, spent where the model's largest singular values
    are; values stay `value_dim` per layer: pooled by their singular values they broke
    SmolLM2-135M, docs/kv-cache.md). `value_dim` ("full" or C_v, at most G d; default
    None: values unchanged) also caches the values as C_v latent values per token and layer, shared by all value
    heads, the rebuild folded into o_proj where that multiplies fewer weights per token
    (docs/kv-cache.md; data-aware with the same
    calibration and damping). `kv_cache` (a fraction in (0, 1], instead of shared_dim and
    value_dim): the fraction of the original key and value cache bytes per token, split
    between keys and values by kv_cache_split. `joint=True` (with kv_cache or shared_dim,
    then at most 2 G d): one latent for keys and values instead (compress_joint,
    docs/kv-cache.md), `key_weighting` ("auto", "none" or a number; joint only) how its keys
    are weighed against its values. `cache_dtype` (torch.bfloat16 for float32 models,
    torch.float8_e4m3fn for float32, bfloat16 and float16 ones) stores the cache in fewer
    bytes (store_cache), and kv_cache then counts those bytes: with a cache of 1/w of the
    model's bytes per number, kv_cache=1/w keeps every key and value whole (keep_whole;
    with joint, the latent at full size), smaller fractions f the sizes of w f. Returns
    one dict per layer; the model is unchanged on error."""
    config = model.config
    family = config.model_type
    layers = rotary_layers(model)
    heads, key_heads = config.num_attention_heads, config.num_key_value_heads
    d = layers[0][1].head_dim
    original = key_heads * d
    where = f"{type(model).__name__} ({family})"
    unknown = sorted(set(options) - {"damping", "allocation", "bands", "context", "value_dim", "kv_cache", "joint",
                                     "key_weighting", "cache_dtype"})
    if unknown:
        raise ValueError(f"option {unknown[0]!r} does not apply to rotary models (their options are bands, context, "
                         "damping, allocation, value_dim, kv_cache, joint, key_weighting and cache_dtype)")
    joint = options.get("joint", False)
    if not isinstance(joint, bool):
        raise ValueError(f"joint must be True or False, got {joint!r}")
    weighting = options.pop("key_weighting", "auto")
    if not joint and weighting != "auto":
        raise ValueError("key_weighting applies to joint=True only (the joint latent's keys beside its values)")
    if weighting not in ("auto", "none") and (isinstance(weighting, bool) or not isinstance(weighting, (int, float))
                                               or not (0 < weighting < float("inf"))):
        raise ValueError(f"key_weighting must be 'auto', 'none' or a number > 0 (the keys' emphasis), got "
                         f"{weighting!r}")
    if joint:
        _refuse_given(options, ("value_dim", "bands", "context", "allocation"), "joint=True (one latent for keys and "
                      "values: every key rebuilt from it, the layer's budget its own)")
    cache_dtype = options.pop("cache_dtype", None)
    widening = cache_widening(cache_dtype, layers[0][1].q_proj.weight.dtype)
    f = options.get("kv_cache")
    if widening > 1 and not isinstance(f, bool) and isinstance(f, (int, float)) and 0 < f <= 1:
        # the values per token of f of the cache bytes, each value stored in fewer bytes
        if f * widening > 1:
            raise ValueError(f"kv_cache {f} with cache_dtype={cache_dtype}: that cache holds at most 1/{widening:g} "
                             f"of this model's cache bytes (that fraction is the exact conversion); give "
                             f"kv_cache <= {1 / widening:g}, or no cache_dtype")
        options["kv_cache"] = f * widening
        if f * widening == 1 and not joint:  # nothing to drop: the original keys and values, stored in fewer bytes
            kv_cache_split(options, shared_dim, original)  # (its refusals: kv_cache alone)
            _refuse_given(options, ("bands", "context", "allocation"),
                          f"kv_cache={f} with cache_dtype={cache_dtype}: every key and value is kept whole")
            report = keep_whole(model, layers)
            store_cache(model, cache_dtype)
            return report
    if options.get("kv_cache") is not None:
        shared_dim, options = kv_cache_split(options, shared_dim, original)
    elif shared_dim is None:
        raise ValueError("shared_dim (key values per token and layer) or kv_cache (a fraction of the key and value "
                         "cache) is required")
    value_dim = options.get("value_dim")
    if value_dim is not None and value_dim != "full":
        value_dim = _validate.integer(value_dim, "value_dim", 1, original)
    if joint:
        report = compress_joint(model, layers, shared_dim, calibration,
                                _validate.nonnegative(options.get("damping", 0.01), "damping"), weighting)
        if cache_dtype is not None:
            store_cache(model, cache_dtype)
        return report
    bands = _validate.integer(options.get("bands", 1), "bands")
    if bands < 1 or (d // 2) % bands:
        raise ValueError(f"bands must be a positive divisor of the {d // 2} frequency pairs of a head, got {bands!r}")
    step = 2 if bands == 1 else 1  # cached values per shared component
    if isinstance(shared_dim, str):
        if shared_dim != "full":
            raise ValueError(f"shared_dim must be 'full' or an integer, got {shared_dim!r}")
    else:
        shared_dim = _validate.integer(shared_dim, "shared_dim")
        if shared_dim < step or shared_dim % step:
            raise ValueError(f"shared_dim must be 'full' or an {'even ' if step == 2 else ''}integer >= {step} (key "
                             f"values cached per token and layer{': two per complex shared key' if step == 2 else ''}"
                             f"), got {shared_dim!r}")
        if shared_dim > original:
            raise ValueError(f"shared_dim {shared_dim} exceeds the original key cache of {original} values per token "
                             f"and layer ({key_heads} key heads x {d}); 'full' is exact")
    context = _validate.integer(options.get("context", 2048), "context")
    if context < 1:
        raise ValueError(f"context must be a positive integer (tokens), got {context!r}")
    damping = _validate.nonnegative(options.get("damping", 0.01), "damping")
    allocation = options.get("allocation", "layer")
    if allocation not in ("layer", "model"):
        raise ValueError(f"allocation must be 'layer' or 'model', got {allocation!r}")
    inv_freq, scaling = _rope_frequencies(model, where) if bands > 1 else (None, 1.0)
    biased = layers[0][1].k_proj.bias is not None or layers[0][1].q_proj.bias is not None
    value_biased = layers[0][1].v_proj.bias is not None
    # Moments of [x; 1] when either side needs the 1; the other side takes the x block.
    ones = biased or (value_dim is not None and value_biased)
    moments = rotary_moments(model, layers, calibration, ones) if calibration is not None else {}
    dim = layers[0][1].q_proj.in_features

    def moment(name, with_one):
        m = moments.get(name, (None, None))[0]
        return m if m is None or with_one == ones else m[:dim, :dim]

    def value_latent(name, module):
        def array(t):
            return None if t is None else t.detach().to(torch.float64).cpu().numpy()

        try:
            return attention.value_latent(array(module.v_proj.weight), array(module.o_proj.weight),
                                          array(module.v_proj.bias), heads=heads, key_heads=key_heads,
                                          values=None if value_dim == "full" else value_dim,
                                          moment=moment(name, value_biased), damping=damping)
        except (ValueError, ArithmeticError) as e:
            raise ValueError(f"{name} ({family}) values: {e}") from None

    def keys(name, module, key_values):
        try:
            return rotary_keys(module.q_proj.weight, module.q_proj.bias, module.k_proj.weight, module.k_proj.bias,
                               heads=heads, key_heads=key_heads, key_values=key_values, bands=bands,
                               inv_freq=inv_freq, context=context, query_moment=moment(name, biased),
                               key_moment=moment(name, biased), damping=damping)
        except (ValueError, ArithmeticError) as e:
            raise ValueError(f"{name} ({family}): {e}") from None

    budgets, spent = {name: shared_dim for name, _ in layers}, 0.0
    if allocation == "model" and shared_dim != "full":
        # The layers' objectives add up: keep the largest sigma^2 of the whole model
        # (no component kept per band: singular values only).
        start = time.perf_counter()
        nothing = [0] * (d // 2 // bands)
        sigma = torch.stack([keys(name, module, nothing).singular_values for name, module in layers])
        top = torch.topk(sigma.flatten(), len(layers) * shared_dim // step).indices
        counts = torch.bincount(top, minlength=sigma.numel()).view(sigma.shape).sum(-1)  # (layers, bands)
        budgets = {name: counts[i].tolist() for i, (name, _) in enumerate(layers)}
        spent = (time.perf_counter() - start) / len(layers)
    built, report = {}, []
    for name, module in layers:
        start = time.perf_counter()
        stats = moments.get(name, (None, None))
        r = keys(name, module, budgets[name])
        key_values = r.key_weight.shape[0]
        v = value_latent(name, module) if value_dim is not None else None
        new = RotarySharedKeyAttention(module, key_values, heads, key_heads, d, r.key_bias is not None, family, bands,
                                       None if v is None else v["latent"].shape[0], value_biased)
        with torch.no_grad():
            if v is not None:
                latent = torch.from_numpy(v["latent"])
                new.value.weight.copy_(latent[:, :dim])
                if value_biased:
                    new.value.bias.copy_(latent[:, dim])
                _copy_value_rebuild(new, v, module)
            new.key.weight.copy_(r.key_weight)
            if r.key_bias is not None:
                new.key.bias.copy_(r.key_bias)
            if bands == 1:
                new.mixing.copy_(r.mixing)
                new.frequency.copy_(r.frequency)
            else:
                new.expand.copy_(r.expand)
                new.inv_freq.copy_(inv_freq)
                new.attention_scaling.fill_(scaling)
        new.train(module.training)
        built[name] = new
        row = {"name": name, "key_values": key_values, "original_key_values": original, "bands": bands,
               "ranks": r.ranks.tolist(), "relative_error": r.relative_error, "data_error": r.data_error,
               "decode_flops": r.decode_flops, "seconds": time.perf_counter() - start + spent,
               "params_before": r.params_before, "params_after": r.params_after}
        if v is not None:
            row.update(value_values=new.value_values, original_value_values=original, value_error=v["relative_error"],
                       value_data_error=v["data_error"], value_params_before=v["params_before"],
                       value_params_after=v["params_after"])
        if stats[1] is not None:
            row["calibration_tokens"] = stats[1]
        report.append(row)
    swap(model, dict(layers), built)
    def one_or_all(sizes):
        return sizes[0] if len(set(sizes)) == 1 else sizes

    entry = {"family": family, "key_values": one_or_all([m.key_values for m in built.values()]), "bands": bands}
    if value_dim is not None:
        entry["value_values"] = one_or_all([m.value_values for m in built.values()])
    setattr(config, ROTARY_CONFIG_KEY, entry)
    if cache_dtype is not None:
        store_cache(model, cache_dtype)
    return report


def _refuse_given(options: dict, names: tuple, form: str) -> None:
    """Refuses the first of the options `names` that is given, which `form` does not use."""
    given = [k for k in names if options.get(k) is not None]
    if given:
        raise ValueError(f"{given[0]} does not apply to {form}")


def keep_whole(model: nn.Module, layers: list) -> list:
    """Every attention layer as RotarySharedKeyAttention with its original keys and values
    (`whole`: k_proj as the key, the G rotated key heads and the G value heads cached), for
    a cache stored in fewer bytes than the model computes in (compress_rotary's kv_cache
    with cache_dtype). One row per layer, its errors zero."""
    config = model.config
    heads, key_heads = config.num_attention_heads, config.num_key_value_heads
    built, report = {}, []
    for name, module in layers:
        start, d = time.perf_counter(), module.head_dim
        new = RotarySharedKeyAttention(module, key_heads * d, heads, key_heads, d, module.k_proj.bias is not None,
                                       config.model_type, whole=True)
        with torch.no_grad():
            new.key.weight.copy_(module.k_proj.weight)
            if module.k_proj.bias is not None:
                new.key.bias.copy_(module.k_proj.bias)
        new.train(module.training)
        built[name] = new
        report.append({"name": name, "key_values": key_heads * d, "original_key_values": key_heads * d,
                       "whole": True, "relative_error": 0.0, "data_error": 0.0,
                       "decode_flops": 2 * heads * d, "seconds": time.perf_counter() - start})
    swap(model, dict(layers), built)
    setattr(config, ROTARY_CONFIG_KEY, {"family": config.model_type, "key_values": key_heads * layers[0][1].head_dim,
                                        "bands": 1, "whole": True})
    return report


def compress_joint(model: nn.Module, layers: list, values, calibration: Iterable | None, damping: float,
                   weighting="auto") -> list:
    """compress_rotary with joint=True: per layer one latent of `values` ("full" or 1 ... 2 G d)
    values per token for keys and values (the library's value_latent with the key weight,
    docs/kv-cache.md), whitened by the calibration moments when given; the keys are rebuilt
    from it and rotated at read time, the values read from it as latent values.
    `weighting` ("key_weighting"): "none" puts keys and values at equal energy; a number a
    weights each key head by its queries' coherence (the rotary bands objective) and the
    keys' side by a; "auto" takes, with calibration, whichever of KEY_WEIGHTINGS leaves the
    lower KL divergence from the original on the first KEY_WEIGHTING_TOKENS calibration
    tokens, "none" without calibration."""
    config = model.config
    family = config.model_type
    heads, key_heads = config.num_attention_heads, config.num_key_value_heads
    first = layers[0][1]
    d, dim = first.head_dim, first.q_proj.in_features
    if values is None:
        raise ValueError("joint=True needs shared_dim (values per token and layer for keys and values together) "
                         "or kv_cache")
    if values != "full":
        values = _validate.integer(values, "shared_dim", 1, 2 * key_heads * d)
    inv_freq, scaling = _rope_frequencies(model, f"{type(model).__name__} ({family})")
    biased = first.k_proj.bias is not None or first.v_proj.bias is not None
    batches = None if calibration is None else list(calibration)
    moments = rotary_moments(model, layers, batches, biased) if batches is not None else {}
    frequencies = inv_freq.double().numpy()

    def build(emphasis) -> tuple[dict, list]:
        built, report = {}, []
        for name, module in layers:
            start = time.perf_counter()
            moment, tokens = moments.get(name, (None, None))
            queries = {} if emphasis == "none" else {
                "query_weight": _array(module.q_proj.weight), "query_bias": _array(module.q_proj.bias),
                "key_emphasis": emphasis, "inv_freq": frequencies}
            try:
                v = attention.value_latent(_array(module.v_proj.weight), _array(module.o_proj.weight),
                                           _array(module.v_proj.bias), heads=heads, key_heads=key_heads,
                                           values=None if values == "full" else values, moment=moment,
                                           damping=damping, key_weight=_array(module.k_proj.weight),
                                           key_bias=_array(module.k_proj.bias), **queries)
            except (ValueError, ArithmeticError) as e:
                raise ValueError(f"{name} ({family}) joint latent: {e}") from None
            latent = torch.from_numpy(v["latent"])
            new = RotarySharedKeyAttention(module, latent.shape[0], heads, key_heads, d, biased, family, joint=True)
            with torch.no_grad():
                new.key.weight.copy_(latent[:, :dim])
                if biased:
                    new.key.bias.copy_(latent[:, dim])
                new.expand.copy_(torch.from_numpy(v["key_expand"]))
                new.inv_freq.copy_(inv_freq)
                new.attention_scaling.fill_(scaling)
                _copy_value_rebuild(new, v, module)
            new.train(module.training)
            built[name] = new
            row = {"name": name, "key_values": new.key_values, "value_values": new.value_values, "joint": True,
                   "key_weighting": emphasis, "original_key_values": key_heads * d,
                   "original_value_values": key_heads * d, "relative_error": v["key_error"],
                   "data_error": v["key_data_error"], "value_error": v["relative_error"],
                   "value_data_error": v["data_error"],
                   "decode_flops": _tenfold.rotary_decode_flops(heads, key_heads, d, new.key_values, d // 2),
                   "seconds": time.perf_counter() - start, "params_before": v["params_before"],
                   "params_after": v["params_after"]}
            if tokens is not None:
                row["calibration_tokens"] = tokens
            report.append(row)
        return built, report

    if weighting != "auto":
        built, report = build(weighting)
    elif batches is None or values == "full":
        built, report = build("none")
    else:
        # Each candidate in place in turn; the one whose next-token distributions stay
        # closest to the original's on the leading calibration tokens is kept (one
        # prefix at a time: the log-probabilities of a long vocabulary are large).
        start = time.perf_counter()
        candidates = [build(emphasis) for emphasis in KEY_WEIGHTINGS]
        losses = [0.0] * len(candidates)
        for prefix in leading_prefixes(batches, KEY_WEIGHTING_TOKENS):
            reference = log_probs(model, prefix)
            for i, (candidate, _) in enumerate(candidates):
                with swapped(model, dict(layers), candidate):
                    losses[i] += divergence(model, prefix, reference)
        built, report = candidates[losses.index(min(losses))]
        for row in report:  # the layer's share of the search
            row["seconds"] = (time.perf_counter() - start) / len(report)
    swap(model, dict(layers), built)
    sizes = sorted({m.key_values for m in built.values()})
    size = sizes[0] if len(sizes) == 1 else [m.key_values for m in built.values()]
    setattr(config, ROTARY_CONFIG_KEY, {"family": family, "key_values": size, "bands": d // 2, "value_values": size,
                                        "joint": True})
    return report


def store_cache(model: nn.Module, dtype) -> nn.Module:
    """Stores what the layers that compress_model converted (shared rotary keys, latent
    values, the joint latent, whole keys and values) cache in `dtype`: torch.bfloat16 (half
    the cache bytes of a float32 model: each cached number rounded to 8 significant bits),
    torch.float8_e4m3fn (a quarter of a float32 model's, half of a 16-bit one's: 4
    significant bits, saturating at 448) or None (the model's own precision). Decoding a
    float32 model on the CPU reads them through the library's kernel. The config records
    it, so save_pretrained / from_pretrained keep it. Returns the model."""
    layers = [m for m in model.modules() if isinstance(m, RotarySharedKeyAttention)]
    if not layers:
        raise ValueError("store_cache: the model has no layers converted by compress_model (shared rotary keys or "
                         "a joint latent)")
    names = {v: k for k, v in CACHE_DTYPES.items()}
    cache_widening(dtype, layers[0].q_proj.weight.dtype)
    for m in layers:
        m.cache_dtype = dtype
    info = dict(getattr(model.config, ROTARY_CONFIG_KEY, None) or {})
    info.pop("cache_dtype", None)
    if dtype is not None:
        info["cache_dtype"] = names[dtype]
    setattr(model.config, ROTARY_CONFIG_KEY, info)
    return model


def load_rotary(model: nn.Module, path) -> nn.Module:
    """Loads what ``save_pretrained`` wrote for a model converted by compress_rotary
    (a directory or a safetensors file) into `model`, built from the same config with
    the original attention: swaps in RotarySharedKeyAttention modules of the sizes the
    config records and loads every tensor. Names and shapes are checked before
    anything changes; a disagreement is refused naming the tensor."""
    where = os.fspath(path)
    info = getattr(model.config, ROTARY_CONFIG_KEY, None)
    if not info:
        raise ValueError(f"the config of '{where}' has no {ROTARY_CONFIG_KEY}: not a model with shared rotary keys")
    is_rotary(model)
    layers = rotary_layers(model)
    def per_layer(key, what):
        recorded = info.get(key)
        sizes = recorded if isinstance(recorded, list) else [recorded] * len(layers)
        if len(sizes) != len(layers):
            raise ValueError(f"'{where}': {len(sizes)} {what} sizes recorded for {len(layers)} attention layers")
        return sizes

    config = model.config
    joint = info.get("joint", False) is True
    whole = info.get("whole", False) is True
    key_bias = lambda m: m.k_proj.bias is not None or (  # noqa: E731
        not whole and (m.v_proj if joint else m.q_proj).bias is not None)
    built = {name: RotarySharedKeyAttention(module, int(size), config.num_attention_heads,
                                            config.num_key_value_heads, module.head_dim, key_bias(module),
                                            config.model_type, int(info.get("bands", 1)),
                                            None if values is None else int(values), module.v_proj.bias is not None,
                                            joint, whole)
             for (name, module), size, values in zip(layers, per_layer("key_values", "key"),
                                                     per_layer("value_values", "value"))}
    tensors, _ = read_checkpoint(path)
    inside = tuple(n + "." for n, _ in layers)
    target = {k: v for k, v in model.state_dict().items() if not k.startswith(inside)}
    for name, module in built.items():
        target.update({f"{name}.{k}": v for k, v in module.state_dict().items()})
    for key, t in tensors.items():
        if key not in target:
            raise ValueError(f"'{where}': tensor '{key}' is not part of this {type(model).__name__} with shared "
                             "rotary keys")
        if tuple(t.shape) != tuple(target[key].shape):
            raise ValueError(f"'{where}': tensor '{key}' has shape {tuple(t.shape)}, the model expects "
                             f"{tuple(target[key].shape)}")
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded = {params[k].data_ptr() for k in tensors if k in params}
    for key in target:
        if key not in tensors and not (key in params and params[key].data_ptr() in loaded):
            raise ValueError(f"'{where}' has no tensor for '{key}'")
    stored = info.get("cache_dtype")
    if stored is not None:
        if stored not in CACHE_DTYPES:
            raise ValueError(f"'{where}': cache_dtype {stored!r} is not one of {sorted(CACHE_DTYPES)}")
        cache_widening(CACHE_DTYPES[stored], layers[0][1].q_proj.weight.dtype)
    swap(model, dict(layers), built)
    model.load_state_dict(tensors, strict=False)
    if stored is not None:
        store_cache(model, CACHE_DTYPES[stored])
    return model
