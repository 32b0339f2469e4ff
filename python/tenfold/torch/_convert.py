"""In-place conversion of Hugging Face transformers models to collaborative attention."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ._attention import (
    AlbertCollaborativeAttention,
    CollaborativeAttention,
    ConvertedCollaborativeAttention,
    Gpt2CollaborativeAttention,
)
from ._calibration import moment_sums
from ._checkpoint import read_checkpoint
from ._swap import swap
from .rotary import ROTARY_CONFIG_KEY, compress_rotary, is_rotary, load_rotary, rotary_layers

#: The config attribute that marks a converted model (written by save_pretrained).
CONFIG_KEY = "tenfold_collaborative"
#: The names of one layer's collaborative tensors, after the layer prefix.
COLLAB_NAMES = ("collab.mixing", "collab.query.weight", "collab.key.weight", "collab.content_bias.weight")
_SCALE_CONVENTION = "scale folded into mixing and content_bias"


@dataclass(frozen=True)
class _Family:
    name: str
    model_types: tuple
    classes: tuple  # attention module class names the converter knows
    query: str
    key: str
    value: str
    output: str | None
    dropout: str  # attribute holding the attention dropout (module or float)


_FAMILIES = (
    _Family("bert", ("bert", "roberta"), ("BertSelfAttention", "RobertaSelfAttention"),
            "query", "key", "value", None, "dropout"),
    _Family("distilbert", ("distilbert",), ("DistilBertSelfAttention",),
            "q_lin", "k_lin", "v_lin", "out_lin", "dropout"),
    _Family("albert", ("albert",), ("AlbertAttention",),
            "query", "key", "value", "dense", "attention_dropout"),
    _Family("vit", ("vit",), ("ViTAttention",), "q_proj", "k_proj", "v_proj", "o_proj", "attention_dropout"),
    _Family("deit", ("deit",), ("DeiTAttention",), "q_proj", "k_proj", "v_proj", "o_proj", "attention_dropout"),
    _Family("gpt2", ("gpt2",), ("GPT2Attention",), "c_attn", "c_attn", "c_attn", "c_proj", "attn_dropout"),
)


def _family(model: nn.Module) -> _Family:
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    for f in _FAMILIES:
        if model_type in f.model_types:
            break
    else:
        known = ", ".join(t for f in _FAMILIES for t in f.model_types)
        raise ValueError(
            f"{type(model).__name__} (model_type {model_type!r}) is not a supported family; "
            f"tenfold.torch converts {known} (and llama, qwen2, mistral with compress_model)"
        )
    if getattr(config, "is_decoder", False) and f.name != "gpt2" or getattr(config, "add_cross_attention", False):
        raise ValueError(
            f"{type(model).__name__} ({f.name}): decoder or cross-attention configurations are not supported"
        )
    impl = getattr(config, "_attn_implementation", None)
    if impl not in (None, "eager", "sdpa"):
        raise ValueError(
            f"{type(model).__name__} ({f.name}): attention implementation {impl!r} is not supported; "
            "use model.set_attn_implementation('sdpa') or 'eager' first"
        )
    return f


def _dropout_p(module, f: _Family) -> float:
    d = getattr(module, f.dropout, 0.0)
    return float(d.p if isinstance(d, nn.Dropout) else d)


def _expect(module, name: str, f: _Family, attr: str, shape=None):
    m = getattr(module, attr, None)
    w = getattr(m, "weight", None)
    if not isinstance(w, torch.Tensor) or (shape is not None and tuple(w.shape) != shape):
        want = f" with weight {shape}" if shape is not None else ""
        raise ValueError(
            f"{name} ({type(module).__name__}, {f.name}): expected a submodule '{attr}'{want}; "
            "this attention module differs from the one the converter knows (another transformers version?)"
        )
    return m


def _layers(model: nn.Module, f: _Family) -> list:
    """The model's attention modules of the family, shared modules once (ALBERT)."""
    found = []
    for name, module in model.named_modules():
        if isinstance(module, CollaborativeAttention):
            raise ValueError(f"{name} ({f.name}) is already collaborative")
        if type(module).__name__ in f.classes:
            found.append((name, module))
    if not found:
        raise ValueError(
            f"{type(model).__name__} ({f.name}): no attention module of class {' or '.join(f.classes)} found; "
            "this model's attention differs from the one the converter knows (another transformers version?)"
        )
    for name, module in found:
        _weights(name, module, f, _heads(model, module))  # refuses a module of another shape
    return found


@dataclass
class LayerWeights:
    """One layer's query/key side in PyTorch (out, in) layout, as the adapter takes it:
    query_weight and key_weight (H d, D), query_bias (H d) or None. The layer's own
    score scale is folded into the query side so that 1/sqrt(d) is the scale."""

    name: str
    heads: int
    head_dim: int
    query_weight: torch.Tensor
    key_weight: torch.Tensor
    query_bias: torch.Tensor | None


def _weights(name: str, module, f: _Family, heads: int) -> LayerWeights:
    if f.name == "gpt2":
        c_attn = _expect(module, name, f, "c_attn")
        _expect(module, name, f, "c_proj")
        w, b = c_attn.weight.detach(), c_attn.bias.detach()
        dim = w.shape[0]
        if w.shape != (dim, 3 * dim):
            raise ValueError(f"{name} (gpt2): c_attn.weight has shape {tuple(w.shape)}, expected ({dim}, {3 * dim})")
        # Conv1D stores (in, out) with out = [q | k | v].
        wq, wk, bq = w[:, :dim].T, w[:, dim : 2 * dim].T, b[:dim]
    else:
        q = _expect(module, name, f, f.query)
        k = _expect(module, name, f, f.key, tuple(q.weight.shape))
        _expect(module, name, f, f.value)
        if f.output:
            _expect(module, name, f, f.output)
        wq, wk = q.weight.detach(), k.weight.detach()
        bq = q.bias.detach() if q.bias is not None else None
    if wq.shape[0] % heads:
        raise ValueError(f"{name} ({f.name}): query width {wq.shape[0]} is not divisible by {heads} heads")
    head_dim = wq.shape[0] // heads
    # The module's scale s; the collaborative form folds 1/sqrt(d), so scale the queries
    # by s sqrt(d) when the module uses another one (GPT-2's per-layer scaling).
    factor = float(getattr(module, "scaling", head_dim**-0.5)) * math.sqrt(head_dim)
    if abs(factor - 1.0) > 1e-12:
        wq = wq * factor
        bq = bq * factor if bq is not None else None
    return LayerWeights(name, heads, head_dim, wq, wk, bq)


def _heads(model: nn.Module, module) -> int:
    """The head count the module's forward splits into (its own attribute, which a
    config edited after the model was built no longer tells); the config's when the
    module keeps none."""
    for attr in ("num_attention_heads", "n_heads", "num_heads"):
        heads = getattr(module, attr, None)
        if isinstance(heads, int) and not isinstance(heads, bool):
            return heads
    return int(model.config.num_attention_heads)


def attention_layers(model: nn.Module) -> list:
    """The query/key side of every attention layer the converter would replace, as a
    list of LayerWeights (shared modules, as ALBERT's, once)."""
    f = _family(model)
    return [_weights(n, m, f, _heads(model, m)) for n, m in _layers(model, f)]


def _build(name: str, module, f: _Family, heads: int, tensors: Mapping) -> CollaborativeAttention:
    """A collaborative module for `module` with the given collab tensors (any of NumPy
    arrays or torch tensors), in the original weight's dtype and device."""
    lw = _weights(name, module, f, heads)
    dim = lw.query_weight.shape[1]
    ref = lw.key_weight
    mixing = tensors["collab.mixing"]
    if len(mixing.shape) != 2 or mixing.shape[0] != heads:
        raise ValueError(f"'{name}.collab.mixing' has shape {tuple(mixing.shape)}, expected ({heads}, R)")
    shared = int(mixing.shape[1])
    want = {"collab.query.weight": (shared, dim), "collab.key.weight": (shared, dim),
            "collab.content_bias.weight": (heads, dim)}
    for key, shape in want.items():
        if tuple(tensors[key].shape) != shape:
            raise ValueError(f"'{name}.{key}' has shape {tuple(tensors[key].shape)}, expected {shape}")
    kw = dict(dropout=_dropout_p(module, f), causal=bool(getattr(module, "is_causal", False)),
              layer_idx=getattr(module, "layer_idx", None), family=f.name, dtype=ref.dtype, device=ref.device)
    if f.name == "gpt2":
        from transformers.pytorch_utils import Conv1D

        value = Conv1D(dim, dim).to(dtype=ref.dtype, device=ref.device)
        with torch.no_grad():
            value.weight.copy_(module.c_attn.weight[:, 2 * dim :])
            value.bias.copy_(module.c_attn.bias[2 * dim :])
        new = Gpt2CollaborativeAttention(dim, heads, lw.head_dim, shared, value=value, output=module.c_proj,
                                         output_name="c_proj", resid_dropout=module.resid_dropout, **kw)
    else:
        parts = dict(value=getattr(module, f.value), value_name=f.value,
                     output=getattr(module, f.output) if f.output else None, output_name=f.output)
        if f.name == "albert":
            new = AlbertCollaborativeAttention(dim, heads, lw.head_dim, shared, output_dropout=module.output_dropout,
                                               layer_norm=module.LayerNorm, **parts, **kw)
        else:
            new = ConvertedCollaborativeAttention(dim, heads, lw.head_dim, shared, **parts, **kw)
    with torch.no_grad():
        for key in COLLAB_NAMES:
            value = tensors[key]
            new.get_parameter(key).copy_(value if isinstance(value, torch.Tensor) else torch.tensor(np.asarray(value)))
    new.train(module.training)
    return new


def convert(model: nn.Module, tensors: Mapping) -> nn.Module:
    """Replaces the attention modules named in `tensors` (module name -> mapping of the
    four collab tensors) by CollaborativeAttention with those tensors. Every module
    is built before any is swapped: on an error the model is unchanged."""
    f = _family(model)
    layers = dict(_layers(model, f))
    unknown = sorted(set(tensors) - set(layers))
    if unknown:
        raise ValueError(f"{unknown[0]} is no {f.name} attention module of {type(model).__name__}")
    missing = sorted(set(layers) - set(tensors))
    if missing:
        raise ValueError(f"no collaborative tensors for {missing[0]} ({f.name})")
    built = {}
    for name, module in layers.items():
        try:
            built[name] = _build(name, module, f, _heads(model, module), tensors[name])
        except (KeyError, ValueError, RuntimeError) as e:
            raise ValueError(f"{name} ({f.name}): {e}") from None
    swap(model, layers, built)
    _mark(model, built)
    return model


def _mark(model: nn.Module, built: Mapping) -> None:
    """Records the conversion in the config, which save_pretrained writes."""
    shared = {m.shared_dim for m in built.values()}
    family = next(iter(built.values())).family
    setattr(model.config, CONFIG_KEY, {"family": family, "shared_dim": shared.pop() if len(shared) == 1 else None,
                                       "scale_convention": _SCALE_CONVENTION})


def input_moments(model: nn.Module, calibration: Iterable) -> dict:
    """The statistics compress_model uses for the data-aware objective: for each
    attention module name, (E[x x^T] as float64 NumPy (D, D), token count) over the
    inputs the module sees on the calibration batches (padding excluded)."""
    f = _family(model)
    return _moments(model, _layers(model, f), calibration)


def write_calibration(model: nn.Module, calibration: Iterable, path, source: str = "") -> int:
    """Writes the calibration statistics ``tenfold attention compress --calibration``
    reads for a rotary model (Llama, Qwen2, Mistral): for every attention module name N,
    N + ".input_moment" (float64), E[x x^T] (D, D) of the module's inputs on the
    calibration batches (padding excluded), or, when the layers have query, key or value
    biases (Qwen2), E[x' x'^T] (D + 1, D + 1) of x' = [x; 1]; metadata
    tenfold.calibration.tokens (the token count) and tenfold.calibration.source
    (`source`). Written whole or not at all. Returns the token count."""
    from safetensors.torch import save_file

    if not is_rotary(model):
        raise ValueError(f"write_calibration: {type(model).__name__} is not a rotary model (llama, qwen2, mistral); "
                         "bench/real_model/calibrate.py writes the statistics of BERT-family checkpoints")
    layers = rotary_layers(model)
    first = layers[0][1]
    biases = (first.q_proj.bias, first.k_proj.bias, first.v_proj.bias)
    stats = moment_sums(model, layers, calibration, append_one=any(b is not None for b in biases))
    tokens = stats[layers[0][0]][1]
    tensors = {f"{name}.input_moment": m.contiguous() for name, (m, _) in stats.items()}
    tmp = os.fspath(path) + ".tmp"
    save_file(tensors, tmp, metadata={"tenfold.calibration.tokens": str(tokens),
                                      "tenfold.calibration.source": source})
    os.replace(tmp, os.fspath(path))
    return tokens


def _moments(model: nn.Module, layers: list, calibration: Iterable) -> dict:
    """Per-layer uncentred second moments E[x x^T] of the attention inputs over the
    calibration batches (padding tokens excluded when a batch has an attention_mask);
    float64 NumPy (D, D) and the token count."""
    return {name: (m.numpy(), c) for name, (m, c) in moment_sums(model, layers, calibration).items()}


def compress_model(model: nn.Module, shared_dim: int | str | None = None, calibration: Iterable | None = None,
                   **options) -> list:
    """Compresses every attention layer of a transformers model in place to shared
    dimension R = `shared_dim` with the C++ adapter (tenfold.attention.compress) and
    swaps in CollaborativeAttention modules. `calibration`: an iterable of input
    batches (dicts of model inputs, tuples, or tensors) for the data-aware objective;
    `options` go to tenfold.attention.compress (damping, init, n_iter_max, tol,
    random_state, backend). Returns one dict per layer (name, relative_error,
    data_error, iterations, converged, seconds, params_before, params_after). The model
    is left unchanged when any layer fails. Rotary models (llama, qwen2, mistral) get
    shared rotary keys instead (tenfold.torch.rotary.compress_rotary, docs/rope.md):
    `shared_dim` is "full" or the key values cached per token and layer, and
    `kv_cache=f` instead compresses keys and values to a fraction f of their cache
    (docs/kv-cache.md)."""
    from tenfold import attention

    if is_rotary(model):  # RoPE families: shared rotary keys (docs/rope.md)
        return compress_rotary(model, shared_dim, calibration, **options)
    if options.get("kv_cache") is not None:
        raise ValueError(f"kv_cache applies to rotary decoders (llama, qwen2, mistral); "
                         f"{type(model).__name__} is compressed by shared_dim")
    if shared_dim is None:
        raise ValueError("shared_dim (the shared query/key dimension of every attention layer) is required")
    f = _family(model)
    layers = _layers(model, f)
    weights = [_weights(n, m, f, _heads(model, m)) for n, m in layers]
    moments = _moments(model, layers, calibration) if calibration is not None else {}
    tensors, report = {}, []
    for lw in weights:
        extra = {}
        if lw.name in moments:
            extra["input_moment"] = moments[lw.name][0]

        def np32(t):
            return None if t is None else t.detach().to(torch.float32).cpu().numpy()

        try:
            r = attention.compress(np32(lw.query_weight), np32(lw.key_weight), np32(lw.query_bias),
                                   heads=lw.heads, shared_dim=shared_dim, **extra, **options)
        except Exception as e:  # the adapter's own message, with the layer named
            raise ValueError(f"{lw.name} ({f.name}): {e}") from None
        tensors[lw.name] = {k: r[k] for k in COLLAB_NAMES}
        row = {"name": lw.name}
        for k in ("relative_error", "data_error", "iterations", "converged", "seconds",
                  "params_before", "params_after"):
            row[k] = getattr(r, k, None)
        if lw.name in moments:
            row["calibration_tokens"] = moments[lw.name][1]
        report.append(row)
    convert(model, tensors)
    return report


def _key_mapper(model: nn.Module, target: Mapping):
    """Maps a checkpoint's tensor name to the model's parameter name the way
    transformers does when it loads (its renamings of older spellings, such as ViT's
    encoder.layer.<n>.attention.attention.query, and the base-model prefix), then
    moves the collaborative tensors of the older ViT/DeiT spelling
    (...attention.attention.collab.) to the module that holds them."""
    base = getattr(model, "base_model_prefix", "") or None
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming, rename_source_key

        renamings = [t for t in get_model_conversion_mapping(model) if isinstance(t, WeightRenaming)]
    except ImportError:  # a transformers release without conversion mappings
        renamings, rename_source_key = [], None

    def key(name: str) -> str:
        if rename_source_key is not None:
            name, _ = rename_source_key(name, renamings, [], base, target)
        elif base and name.startswith(base + ".") and name[len(base) + 1:] in target:
            name = name[len(base) + 1:]
        elif base and base + "." + name in target:
            name = base + "." + name
        return name.replace(".attention.attention.collab.", ".attention.collab.")

    return key


def _meta_int(meta: Mapping, key: str, where: str) -> int:
    """A positive integer of the checkpoint's metadata, refused naming file and key."""
    value = meta[key]
    if not re.fullmatch(r"[0-9]+", value) or int(value) < 1:
        raise ValueError(f"'{where}': metadata {key} = {value!r} is not a positive integer")
    return int(value)


def _check_finite(key: str, t: torch.Tensor, where: str) -> None:
    """Refuses a NaN or Inf entry, naming the tensor and the index of the first."""
    bad = ~torch.isfinite(t)
    if bad.any():
        index = tuple(int(i) for i in bad.nonzero()[0])
        kind = "NaN" if torch.isnan(t[index]) else "Inf"
        raise ValueError(f"'{where}': tensor '{key}' has a non-finite entry ({kind}) at index "
                         f"[{', '.join(map(str, index))}]")


def load_compressed(model: nn.Module, path) -> nn.Module:
    """Loads a checkpoint written by ``tenfold attention compress`` (or a directory
    written by save_pretrained of a converted model) into `model`, a model of the
    same config with the original attention: swaps in CollaborativeAttention modules
    (RotarySharedKeyAttention for a rotary model, whose checkpoint's tenfold.rotary
    metadata gives the sizes) and loads every tensor. Shapes and metadata are checked against the model's
    attention modules, and the collaborative tensors for NaN and Inf, before anything
    changes; a disagreement is refused naming the file and the key or tensor."""
    if is_rotary(model):  # written by `tenfold attention compress` for a rotary checkpoint
        _, meta = read_checkpoint(path)
        where = os.fspath(path)
        if "tenfold.rotary" not in meta:
            raise ValueError(f"'{where}' has no tenfold.rotary metadata: not a checkpoint with shared rotary keys")
        info = json.loads(meta["tenfold.rotary"])
        if info.get("family") != model.config.model_type:
            raise ValueError(f"'{where}' was converted from a {info.get('family')!r} model, this one is "
                             f"{model.config.model_type!r}")
        had = getattr(model.config, ROTARY_CONFIG_KEY, None)
        setattr(model.config, ROTARY_CONFIG_KEY, info)
        try:
            return load_rotary(model, path)
        except Exception:
            setattr(model.config, ROTARY_CONFIG_KEY, had)
            raise
    f = _family(model)
    tensors, meta = read_checkpoint(path)
    where = os.fspath(path)
    if meta.get("tenfold.scale_convention", _SCALE_CONVENTION) != _SCALE_CONVENTION:
        raise ValueError(f"'{where}': scale convention {meta['tenfold.scale_convention']!r} is not "
                         f"{_SCALE_CONVENTION!r}")
    layers = _layers(model, f)
    for name, module in layers:
        lw = _weights(name, module, f, _heads(model, module))
        for key, want in (("tenfold.heads", lw.heads), ("tenfold.head_dim", lw.head_dim)):
            if key in meta and _meta_int(meta, key, where) != want:
                raise ValueError(f"'{where}': metadata {key} = {meta[key]} disagrees with the model ({want}, "
                                 f"{name})")
    config_info = getattr(model.config, CONFIG_KEY, None) or {}
    shared = (_meta_int(meta, "tenfold.shared_dim", where) if "tenfold.shared_dim" in meta
              else config_info.get("shared_dim"))
    inside = tuple(n + "." for n, _ in layers)
    original = {k: v for k, v in model.state_dict().items() if not k.startswith(inside)}

    # Names as transformers maps them on loading, against the converted model's names.
    names = dict.fromkeys(original)
    for name, module in layers:
        names.update(dict.fromkeys(f"{name}.{k}" for k, _ in module.state_dict().items()))
        names.update(dict.fromkeys(f"{name}.{c}" for c in COLLAB_NAMES + ("value.weight", "value.bias")))
    model_key = _key_mapper(model, names)
    mapped = {model_key(key): (key, t) for key, t in tensors.items()}

    per_layer, built = {}, {}
    for name, module in layers:
        missing = [c for c in COLLAB_NAMES if f"{name}.{c}" not in mapped]
        if missing:
            raise ValueError(f"'{where}' has no tensor for '{name}.{missing[0]}': not a collaborative checkpoint of "
                             f"this {f.name} model")
        per_layer[name] = {c: mapped[f"{name}.{c}"][1] for c in COLLAB_NAMES}
        for c in COLLAB_NAMES:
            _check_finite(mapped[f"{name}.{c}"][0], per_layer[name][c], where)
        heads = _heads(model, module)
        mixing = per_layer[name]["collab.mixing"]
        if shared is not None and tuple(mixing.shape) != (heads, shared):
            raise ValueError(f"'{where}': tensor '{mapped[name + '.collab.mixing'][0]}' has shape "
                             f"{tuple(mixing.shape)}, but the checkpoint's shared dimension is {shared} and the "
                             f"module has {heads} heads")
        try:
            built[name] = _build(name, module, f, heads, per_layer[name])
        except ValueError as e:
            raise ValueError(f"'{where}': {e}") from None
    # Every tensor of the file against the converted model's state, by name and shape.
    target = dict(original)
    for name, module in built.items():
        target.update({f"{name}.{k}": v for k, v in module.state_dict().items()})
    for mk, (key, t) in mapped.items():
        if mk not in target:
            raise ValueError(f"'{where}': tensor '{key}' is not part of this {type(model).__name__}")
        if tuple(t.shape) != tuple(target[mk].shape):
            raise ValueError(f"'{where}': tensor '{key}' has shape {tuple(t.shape)}, the model expects "
                             f"{tuple(target[mk].shape)}")
    # Parameters the file lacks must be tied to one it has (shared embeddings).
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded = {params[k].data_ptr() for k in mapped if k in params}
    for k in target:
        if k not in mapped and k in params and params[k].data_ptr() not in loaded:
            raise ValueError(f"'{where}' has no tensor for '{k}'")
    swap(model, dict(layers), built)
    _mark(model, built)
    model.load_state_dict({mk: t for mk, (_, t) in mapped.items()}, strict=False)
    return model


def from_pretrained(path, model_class=None, **config_overrides) -> nn.Module:
    """Loads a converted model saved with ``model.save_pretrained(path)``: builds the
    model from its config (whose ``tenfold_collaborative`` entry marks it) and loads
    the collaborative checkpoint. `model_class` defaults to the config's first
    architecture (for example transformers.BertModel). The model computes in the precision
    its config records (as transformers' from_pretrained)."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(path, **config_overrides)
    rotary = bool(getattr(config, ROTARY_CONFIG_KEY, None))
    if not rotary and not getattr(config, CONFIG_KEY, None):
        raise ValueError(f"'{os.fspath(path)}' is not a collaborative model (its config has no {CONFIG_KEY})")
    if model_class is None:
        archs = getattr(config, "architectures", None) or []
        if not archs or not hasattr(transformers, archs[0]):
            raise ValueError(f"'{os.fspath(path)}': config names no known architecture; pass model_class")
        model_class = getattr(transformers, archs[0])
    model = model_class(config)
    dtype = getattr(config, "dtype", None)
    dtype = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        model.to(dtype)
    model.eval()
    return load_rotary(model, path) if rotary else load_compressed(model, path)
