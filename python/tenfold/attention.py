"""The attention adapter: query/key weights in collaborative form (Cordonnier et al. 2020).

Weights are NumPy arrays in PyTorch's ``nn.Linear`` layout (out, in) = (H d, D). The
results carry the tensors under the names the checkpoint writer gives them (without
the layer prefix), in its layouts. See docs/attention.md for the conventions.
"""

from collections.abc import Mapping

import numpy as np

from . import _tenfold, _validate
from ._arrays import as_float_array, float_dtype

__all__ = ["compress", "compress_file", "analyze_file", "value_latent", "value_expansion_folded", "CompressResult",
           "CheckpointReport"]


class _Record:
    """Read-only attributes from a dict."""

    def __init__(self, fields):
        object.__setattr__(self, "_fields", tuple(fields))
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self):
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{type(self).__name__}({inner})"


class CompressResult(Mapping):
    """The collaborative tensors of one layer, a read-only Mapping.

    Keys (shapes): "collab.mixing" (H, R), "collab.query.weight" (R, D),
    "collab.key.weight" (R, D), "collab.content_bias.weight" (H, D; zeros without a
    query bias). Attributes: relative_error (weight space), data_error (data space,
    None without moments), iterations, converged, seconds, params_before,
    params_after.
    """

    def __init__(self, tensors, **info):
        self._tensors = dict(tensors)
        for array in self._tensors.values():
            array.setflags(write=False)
        self.__dict__.update(info)

    def __getitem__(self, name):
        return self._tensors[name]

    def __iter__(self):
        return iter(self._tensors)

    def __len__(self):
        return len(self._tensors)

    def __repr__(self):
        shapes = {k: v.shape for k, v in self._tensors.items()}
        return f"CompressResult({shapes}, relative_error={self.relative_error:.6g})"


class CheckpointReport(_Record):
    """What compress_file did: heads, head_dim, input_dim, shared_dim, layers (one
    record per layer: index, prefix, relative_error, data_error, iterations,
    converged, seconds, params_before, params_after), seconds, params_before,
    params_after, calibration_tokens, calibration_source."""


class LayerReport(_Record):
    """One layer of a CheckpointReport."""


class LayerRedundancy(_Record):
    """Redundancy curves of one layer: index, prefix and the EnergyCurve records
    products (of P = [W_Q^1 W_K^1^T | ...]), queries and keys."""


class EnergyCurve(_Record):
    """energy (squared singular values, descending), cumulative (fractions), dim90,
    dim95, dim99 (dimensions that explain 90/95/99 %)."""


def compress(
    query_weight,
    key_weight,
    query_bias=None,
    *,
    heads,
    shared_dim,
    input_moment=None,
    key_input_moment=None,
    damping=0.3,
    init="structured",
    n_iter_max=100,
    tol=1e-6,
    random_state=0,
    backend="cpu",
    dtype=None,
):
    """Compress one layer's query/key side into collaborative form with R shared dimensions.

    Parameters
    ----------
    query_weight, key_weight : array_like, shape (H d, D)
        PyTorch ``nn.Linear`` weights (out, in); head h owns rows h d ... (h+1) d - 1.
    query_bias : array_like, shape (H d,), optional
        Kept exactly as the content vectors (the key bias never changes a probability).
    heads : int
        H, dividing the weights' rows.
    shared_dim : int
        R, in [1, H d]. At R = H d the exact form is returned without iterating.
    input_moment : array_like, shape (D, D), optional
        Second moment E[x x^T] of the layer's inputs: the data-aware objective.
    key_input_moment : array_like, shape (D, D), optional
        The key side's, for cross-attention (default: input_moment).
    damping : float
        Data-aware only: S + damping tr(S) / D I is factored.
    init : {'structured', 'heads', 'nvecs', 'random'}
    n_iter_max, tol : ALS sweeps and the stopping tolerance on the relative error.
    random_state : int
        Seed for init='random' (and filler columns).
    backend : {'cpu', 'cuda'}
    dtype : {None, numpy.float32, numpy.float64}
        None: float32 when both weights are float32, else float64.

    Returns
    -------
    CompressResult
        A read-only Mapping of the checkpoint writer's tensor names to arrays.

    Raises
    ------
    KeyboardInterrupt
        Ctrl-C, seen after the current ALS sweep.

    Examples
    --------
    >>> import numpy as np
    >>> from tenfold import attention
    >>> rng = np.random.default_rng(0)
    >>> wq, wk = rng.normal(size=(2, 64, 32)) / np.sqrt(32)
    >>> r = attention.compress(wq, wk, heads=4, shared_dim=64)
    >>> sorted((k, v.shape) for k, v in r.items())
    [('collab.content_bias.weight', (4, 32)), ('collab.key.weight', (64, 32)), ('collab.mixing', (4, 64)), ('collab.query.weight', (64, 32))]
    >>> r.iterations, bool(r.relative_error < 1e-6)
    (0, True)
    """
    dt = float_dtype(dtype)
    if dt is None:
        both32 = all(_is_float32(w) for w in (query_weight, key_weight))
        dt = np.dtype(np.float32 if both32 else np.float64)
    qw = as_float_array(query_weight, "query_weight", dt)
    kw = as_float_array(key_weight, "key_weight", dt)
    qb = None if query_bias is None else as_float_array(query_bias, "query_bias", dt)
    sq = None if input_moment is None else as_float_array(input_moment, "input_moment", np.float64)
    sk = (
        None
        if key_input_moment is None
        else as_float_array(key_input_moment, "key_input_moment", np.float64)
    )
    _layer_shapes(qw, kw, qb, sq, sk)
    r = _tenfold.compress(
        qw, kw, qb, _validate.integer(heads, "heads", 1),
        _validate.integer(shared_dim, "shared_dim", 1), sq, sk, _validate.nonnegative(damping, "damping"), str(init),
        _validate.integer(n_iter_max, "n_iter_max", 1, _validate.INT_MAX),
        _validate.nonnegative(tol, "tol"), _validate.seed(random_state), str(backend),
    )
    return CompressResult(r.pop("tensors"), **r)


def _is_float32(w):
    """Whether `w` holds float32 values (in either byte order)."""
    return np.asarray(w).dtype.newbyteorder("=") == np.float32


def _layer_shapes(qw, kw, qb, sq, sk):
    """The NumPy shapes of compress's arrays: weights (H d, D), bias (H d,), moments (D, D)."""
    if qw.ndim != 2 or 0 in qw.shape:
        raise ValueError(f"query_weight must be a non-empty (H d, D) matrix, got shape {qw.shape}")
    if kw.shape != qw.shape:
        raise ValueError(f"key_weight has shape {kw.shape}, expected {qw.shape} (H d, D), the "
                         "shape of query_weight")
    if qb is not None and qb.shape != qw.shape[:1]:
        raise ValueError(f"query_bias has shape {qb.shape}, expected ({qw.shape[0]},) (H d,)")
    d = qw.shape[1]
    for name, s in (("input_moment", sq), ("key_input_moment", sk)):
        if s is not None and s.shape != (d, d):
            raise ValueError(f"{name} has shape {s.shape}, expected ({d}, {d}) (D, D)")


def compress_file(
    input,
    output,
    *,
    shared_dim,
    heads=0,
    calibration=None,
    damping=0.3,
    init="structured",
    n_iter_max=100,
    tol=1e-6,
    random_state=0,
    backend="cpu",
    float64=False,
):
    """Compress every attention layer of a safetensors checkpoint (the families of
    docs/cli.md) and write `output` whole, as ``tenfold attention compress``.

    heads=0 reads the head count from the config.json beside `input`; `calibration`
    is a statistics file (input moments per layer) for the data-aware objective;
    float64 writes the new tensors in float64 (else float32). Returns a
    CheckpointReport. Raises OSError for unreadable or malformed files,
    ValueError for bad options, and KeyboardInterrupt for Ctrl-C, seen after the
    current ALS sweep or layer (`output` is then not written).
    """
    r = _tenfold.compress_file(
        str(input), str(output), _validate.integer(shared_dim, "shared_dim", 1),
        _validate.integer(heads, "heads", 0), None if calibration is None else str(calibration),
        _validate.nonnegative(damping, "damping"), str(init),
        _validate.integer(n_iter_max, "n_iter_max", 1, _validate.INT_MAX),
        _validate.nonnegative(tol, "tol"), _validate.seed(random_state), str(backend),
        bool(float64),
    )
    r["layers"] = [LayerReport(layer) for layer in r["layers"]]
    return CheckpointReport(r)


def analyze_file(input, *, heads=0):
    """Redundancy curves of every attention layer of a checkpoint (as ``tenfold
    attention analyze``): a list of LayerRedundancy records. Ctrl-C is seen after the
    current layer (KeyboardInterrupt)."""
    layers = _tenfold.analyze_file(str(input), _validate.integer(heads, "heads", 0))
    out = []
    for layer in layers:
        for key in ("products", "queries", "keys"):
            layer[key] = EnergyCurve(layer[key])
        out.append(LayerRedundancy(layer))
    return out


def value_latent(value_weight, output_weight, value_bias=None, *, heads, key_heads, values=None,
                 moment=None, damping=0.01, key_weight=None, key_bias=None, query_weight=None, query_bias=None,
                 key_emphasis=1.0, inv_freq=None, context=2048):
    """The latent value cache of one layer (docs/kv-cache.md): `values` latent values per
    token (None: the smallest exact size) shared by the ``key_heads`` value heads, with each
    head's up-projection folded into o_proj. Weights in PyTorch's (out, in) layout:
    value_weight (G d, D), output_weight (E, H d); `moment` the (D', D') second moment of
    [x; 1] (D' = D + 1 with a value bias), for the data-aware objective, whitened as
    S + damping tr(S) / D' I.

    With `key_weight` (G d, D) (and `key_bias`, G d), the joint latent: one latent of
    `values` (at most 2 G d) for keys and values, D' = D + 1 with either bias; the result
    adds ``key_expand`` (G d, C): the keys (before the rotation) rebuilt from c, and
    ``key_error`` / ``key_data_error``, the keys' relative errors. `key_emphasis` a > 0
    weighs the keys' side against the values' (each first scaled to unit energy); with
    `query_weight` (H d, D) (and `query_bias`) and `inv_freq` (the d/2 RoPE frequencies),
    each key head's coordinates are also weighted by its queries' coherence averaged over
    the offsets of a `context`-token sequence (the rotary bands objective): at half the
    cache of SmolLM2-135M, data-aware, a = 2.5 with the queries kept the lowest
    calibration loss (docs/kv-cache.md).

    Returns a dict, float64: ``latent`` (C_v, D'): the cached values c = latent [x; 1] (its
    last column the bias when D' = D + 1); ``expand`` (G d, C_v): the values rebuilt from
    c; ``output`` (E, H C_v): o_proj with the rebuild folded in, applied to the heads'
    attention-weighted latents; ``singular_values``, ``relative_error`` (the objective's,
    weight-only), ``data_error`` (on `moment`, or None), ``params_before``,
    ``params_after`` (with the folded o_proj, or with ``expand`` and the original o_proj:
    whichever value_expansion_folded picks), ``seconds``."""

    vw = np.asarray(value_weight, dtype=np.float64)
    ow = np.asarray(output_weight, dtype=np.float64)
    vb = None if value_bias is None else np.asarray(value_bias, dtype=np.float64)
    s = None if moment is None else np.asarray(moment, dtype=np.float64)
    kw = None if key_weight is None else np.ascontiguousarray(np.asarray(key_weight, dtype=np.float64))
    kb = None if key_bias is None else np.asarray(key_bias, dtype=np.float64)
    if kb is not None and kw is None:
        raise ValueError("key_bias without key_weight: the joint latent needs both key tensors")
    qw = None if query_weight is None else np.ascontiguousarray(np.asarray(query_weight, dtype=np.float64))
    qb = None if query_bias is None else np.asarray(query_bias, dtype=np.float64)
    if (qw is not None or qb is not None) and kw is None:
        raise ValueError("query_weight weighs the joint latent's keys: give key_weight too")
    if qb is not None and qw is None:
        raise ValueError("query_bias without query_weight")
    if qw is not None and inv_freq is None:
        raise ValueError("query_weight needs inv_freq, the d/2 RoPE frequencies the keys are turned by")
    freq = [] if inv_freq is None else [float(f) for f in np.asarray(inv_freq, dtype=np.float64).ravel()]
    count = 0 if values is None else _validate.integer(values, "values", 1)
    return _tenfold.value_latent(np.ascontiguousarray(vw), vb, np.ascontiguousarray(ow),
                                 _validate.integer(heads, "heads", 1),
                                 _validate.integer(key_heads, "key_heads", 1), count,
                                 _validate.nonnegative(damping, "damping"),
                                 None if s is None else np.ascontiguousarray(s), kw, kb, qw, qb,
                                 _validate.number(key_emphasis, "key_emphasis"), freq, _validate.integer(context, "context", 1))


def value_expansion_folded(values, head_dim, hidden) -> bool:
    """Whether a layer with C_v = `values` latent values reads o_proj with the rebuild
    folded in (E, H C_v) rather than rebuilding each head's d values before the original
    o_proj (E, H d): folded when that multiplies fewer weights per token, C_v (E - d) <= d E
    (E = `hidden`, d = `head_dim`)."""
    return _tenfold.value_expansion_folded(_validate.integer(values, "values", 1),
                                           _validate.integer(head_dim, "head_dim", 1),
                                           _validate.integer(hidden, "hidden", 1))
