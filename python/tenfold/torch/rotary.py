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
error is again an SVD per band (rotary_band_keys, query_coherence).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from .. import _validate
from ._calibration import moment_sums
from ._checkpoint import read_checkpoint
from .rotary_attention import RotarySharedKeyAttention

#: model_type -> the attention class the converter replaces.
ROTARY_FAMILIES = {"llama": "LlamaAttention", "qwen2": "Qwen2Attention", "mistral": "MistralAttention"}
#: Families that normalise queries and keys per head before the rotation (QK-norm).
QK_NORM_FAMILIES = ("qwen3", "qwen3_moe", "qwen3_next", "olmo2", "olmoe", "gemma3", "gemma3_text", "cohere2")
#: The config attribute that marks a model converted to shared rotary keys.
ROTARY_CONFIG_KEY = "tenfold_rotary"
#: Singular values below this fraction of the layer's largest are zero ("full" rank).
RANK_TOL = 1e-6
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
    """One layer's shared rotary keys: ``frequency`` (R,), ``key_weight`` (2R, D),
    ``key_bias`` (2R,) or None (present when the query or the key side has a bias),
    ``mixing`` (G, R, 2), all float64; ``ranks`` (d/2,):
    R_j per frequency pair; ``relative_error``: the relative Frobenius error of the
    complex QK tensor (every query head against its group's keys, per frequency);
    ``data_error``: the relative mean squared logit error on the calibration inputs
    (None without them); ``singular_values`` (d/2, G): sigma_{j,k} of the weighted,
    whitened keys, whose squares are the objective's shares (zero where not computed:
    "full" takes the plain SVD)."""

    frequency: torch.Tensor
    key_weight: torch.Tensor
    key_bias: torch.Tensor | None
    mixing: torch.Tensor
    ranks: torch.Tensor
    relative_error: float
    data_error: float | None
    singular_values: torch.Tensor


def _complex_pairs(weight: torch.Tensor, bias: torch.Tensor | None, heads: int, head_dim: int,
                   augment: bool) -> torch.Tensor:
    """(heads d, D) weight and bias -> (heads, d/2, D') complex rows u_{h,j} (D' = D + 1
    when `augment`, the bias or zeros last): pair j of a head is coordinates (j, j + d/2)."""
    w = weight.detach().to(torch.float64)
    if augment:
        b = torch.zeros(w.shape[0], dtype=torch.float64) if bias is None else bias.detach().to(torch.float64)
        w = torch.cat((w, b.to(w.device).unsqueeze(1)), dim=1)
    w = w.view(heads, 2, head_dim // 2, -1)
    return torch.complex(w[:, 0], w[:, 1])


def _energy(v: torch.Tensor, moment: torch.Tensor | None) -> torch.Tensor:
    """Sum over the last axis of |v|^2, or v^H S v for a real symmetric moment S."""
    if moment is None:
        return (v.abs() ** 2).sum(-1)
    return (torch.einsum("...i,ij,...j->...", v.real, moment, v.real)
            + torch.einsum("...i,ij,...j->...", v.imag, moment, v.imag))


def rotary_keys(query_weight: torch.Tensor, query_bias: torch.Tensor | None, key_weight: torch.Tensor,
                key_bias: torch.Tensor | None, *, heads: int, key_heads: int, key_values, query_moment=None,
                key_moment=None, damping: float = 0.01) -> RotaryKeys:
    """The shared rotary keys of one layer (PyTorch (out, in) weights; moments, when
    given, are the (D', D') second moments of [x; 1], D' = D + 1 with biases, D without).

    `key_values` = 2 sum_j R_j real numbers cached per token, "full" for the smallest
    exact size, or a sequence of the d/2 ranks R_j (the singular_values of a call with
    R_j = G everywhere say where they pay most). Objective:
    sum_{h,j} a_{h,j} |L^T (w_{g,j} - sum_r c_{g,r} e_r)|^2, with a_{h,j} = E|q_{h,j}(x)|^2
    (|u_{h,j}|^2 without moments) and S_K + damping tr(S_K)/D' I = L L^T (L = I without
    moments); its minimiser is an SVD per frequency."""
    d = query_weight.shape[0] // heads
    augment = query_bias is not None or key_bias is not None
    u = _complex_pairs(query_weight, query_bias, heads, d, augment)  # (H, d/2, D')
    w = _complex_pairs(key_weight, key_bias, key_heads, d, augment)  # (G, d/2, D')
    dim = w.shape[-1]
    for what, m in (("query_moment", query_moment), ("key_moment", key_moment)):
        if m is not None and tuple(m.shape) != (dim, dim):
            raise ValueError(f"{what} has shape {tuple(m.shape)}, expected ({dim}, {dim})")
    sq = None if query_moment is None else torch.as_tensor(query_moment, dtype=torch.float64)
    sk = None if key_moment is None else torch.as_tensor(key_moment, dtype=torch.float64)
    # Query weight of each key head's group per frequency: a_{g,j} = sum_{h in g} a_{h,j}.
    weight = _energy(u, sq).view(key_heads, heads // key_heads, -1).sum(1)  # (G, d/2)
    full = isinstance(key_values, str)
    given = not full and not _validate.is_integer(key_values)
    if full:  # exactness needs only the span of the keys: plain SVD
        chol = torch.eye(dim, dtype=torch.float64)
    elif sk is None:
        chol = torch.eye(dim, dtype=torch.float64)
    else:
        damped = sk + damping * torch.trace(sk) / dim * torch.eye(dim, dtype=torch.float64)
        chol, info = torch.linalg.cholesky_ex(damped)
        if info:
            raise ValueError("the key-side input moment is not positive definite; raise damping")
    keys = w.permute(1, 2, 0)  # (d/2, D', G): column g is w_{g,j}
    whitened = chol.T.to(keys.dtype) @ keys  # L^T W_j
    scaled = whitened if full else whitened * weight.T.sqrt().unsqueeze(1)
    left, sigma, _ = torch.linalg.svd(scaled, full_matrices=False)  # (d/2, D', G), (d/2, G)
    if full:
        ranks = (sigma > RANK_TOL * sigma.max()).sum(1)
    elif given:
        ranks = torch.as_tensor(key_values, dtype=torch.long)
        if ranks.shape != sigma.shape[:1] or bool((ranks < 0).any() or (ranks > key_heads).any()):
            raise ValueError(f"ranks must be {sigma.shape[0]} integers from 0 to {key_heads}, got {key_values}")
    else:
        # The R = key_values/2 largest sigma^2 over all frequencies (each costs 2 values).
        top = torch.topk(sigma.flatten(), int(key_values) // 2).indices
        ranks = torch.bincount(torch.div(top, sigma.shape[1], rounding_mode="floor"), minlength=sigma.shape[0])
    freq = torch.repeat_interleave(torch.arange(sigma.shape[0]), ranks)
    slot = torch.cat([torch.arange(int(r)) for r in ranks]) if len(freq) else freq
    basis = left[freq, :, slot].T  # (D', R): whitened e_r, unit columns
    # c_{g,r} = e'_r^H L^T w_{g,j(r)}: the projection of the whitened key on the basis.
    coeff = torch.einsum("dr,rdg->gr", basis.conj(), whitened[freq])  # (G, R)
    e = torch.linalg.solve_triangular(chol.T.to(basis.dtype), basis, upper=True)  # L^-T e'_r
    approx = torch.zeros_like(keys)
    approx.index_add_(0, freq, (e.T.unsqueeze(-1) * coeff.T.unsqueeze(1)))  # sum_r e_r c_{g,r}
    diff = (keys - approx).permute(2, 0, 1)  # (G, d/2, D')
    per_head = torch.repeat_interleave(diff, heads // key_heads, dim=0)
    total = (_energy(u, None) * _energy(torch.repeat_interleave(w, heads // key_heads, 0), None)).sum()
    rel = math.sqrt(float((_energy(u, None) * _energy(per_head, None)).sum() / total)) if total > 0 else 0.0
    data = None
    if sq is not None and sk is not None:
        wr = torch.repeat_interleave(w, heads // key_heads, 0)
        qe = _energy(u, sq)
        denom = float((qe * _energy(wr, sk)).sum())
        data = math.sqrt(float((qe * _energy(per_head, sk)).sum()) / denom) if denom > 0 else 0.0
    e_w = e[:-1] if augment else e
    return RotaryKeys(
        frequency=freq,
        key_weight=torch.cat((e_w.real.T, e_w.imag.T), dim=0),
        key_bias=torch.cat((e[-1].real, e[-1].imag)) if augment else None,
        mixing=torch.stack((coeff.real, coeff.imag), dim=-1),
        ranks=ranks,
        relative_error=rel,
        data_error=data,
        singular_values=torch.zeros_like(sigma) if full else sigma,
    )


def _phase_average(omega: torch.Tensor, context: int) -> torch.Tensor:
    """E[e^{i omega Delta}] over the offsets Delta = m - n of all causal pairs (m >= n)
    of a `context`-token sequence (weight context - Delta), elementwise, complex128."""
    out = torch.zeros(omega.shape, dtype=torch.complex128)
    total = context * (context + 1) / 2
    for start in range(0, context, 256):
        delta = torch.arange(start, min(start + 256, context), dtype=torch.float64)
        out += (torch.exp(1j * omega.unsqueeze(-1) * delta) * ((context - delta) / total)).sum(-1)
    return out


def query_coherence(query_weight: torch.Tensor, moment: torch.Tensor | None, inv_freq: torch.Tensor, *,
                    heads: int, key_heads: int, context: int) -> torch.Tensor:
    """(G, d, d): P_g = sum_{h in g} E[v_h v_h^T], v_h = Rot(theta Delta) q_h(x) the query
    of head h turned by the offset Delta (transformers' layout: pair j is coordinates j,
    j + d/2), x with second moment `moment` (I when None), Delta distributed as the
    offsets of a `context`-token causal sequence. The error of head h's logit for a key
    error delta is v_h^T delta, so its mean square is delta^T P delta (docs/rope.md)."""
    d = query_weight.shape[0] // heads
    half = d // 2
    w = query_weight.to(torch.float64).view(heads, d, -1)
    m = w @ w.transpose(1, 2) if moment is None else w @ moment @ w.transpose(1, 2)  # E[q q^T]
    a, b = m[:, :half, :half], m[:, half:, half:]
    ab, ba = m[:, :half, half:], m[:, half:, :half]
    herm = a + b + 1j * (ba - ab)  # E[q_j conj q_k]
    pseudo = a - b + 1j * (ab + ba)  # E[q_j q_k]
    theta = inv_freq.to(torch.float64)
    zc = _phase_average(theta[:, None] - theta[None, :], context) * herm  # E[z_j conj z_k], z = e^{i theta Delta} q
    zn = _phase_average(theta[:, None] + theta[None, :], context) * pseudo  # E[z_j z_k]
    p = torch.empty_like(m)
    p[:, :half, :half] = 0.5 * (zc + zn).real  # E[Re z_j Re z_k]
    p[:, half:, half:] = 0.5 * (zc - zn).real  # E[Im z_j Im z_k]
    p[:, :half, half:] = 0.5 * (zn - zc).imag  # E[Re z_j Im z_k]
    p[:, half:, :half] = p[:, :half, half:].transpose(1, 2)
    return p.view(key_heads, heads // key_heads, d, d).sum(1)


def _psd_root(p: torch.Tensor) -> torch.Tensor:
    """F with F F^T = p for a symmetric positive semidefinite p (negative rounding clamped)."""
    lam, vec = torch.linalg.eigh(p)
    return vec * lam.clamp(min=0).sqrt()


@dataclass
class RotaryBandKeys:
    """One layer's band latent (bands > 1): ``key_weight`` (C, D) and ``key_bias`` (C,)
    or None: the latent values; ``expand`` (G d, C): the rebuilt keys in transformers'
    layout (zero outside each value's band); ``ranks`` (d/2/b,): values per band, in
    band order (b = bands); ``relative_error`` and ``data_error``: the square root of
    the objective's relative value, weight-only and on the undamped calibration moments
    (None without them); ``singular_values`` (d/2/b, 2 G b): sigma of each band's
    weighted, whitened keys (zero for "full", which takes the plain SVD). float64."""

    key_weight: torch.Tensor
    key_bias: torch.Tensor | None
    expand: torch.Tensor
    ranks: torch.Tensor
    relative_error: float
    data_error: float | None
    singular_values: torch.Tensor


def rotary_band_keys(query_weight: torch.Tensor, query_bias: torch.Tensor | None, key_weight: torch.Tensor,
                     key_bias: torch.Tensor | None, *, heads: int, key_heads: int, key_values, inv_freq: torch.Tensor,
                     bands: int, context: int = 2048, query_moment=None, key_moment=None,
                     damping: float = 0.01) -> RotaryBandKeys:
    """The band latent of one layer: every band of `bands` adjacent frequency pairs
    rebuilds its 2 G bands key coordinates from its own real latent values, rotated
    after the rebuild. `key_values`: C latent values per token, "full" (the smallest
    exact size) or a sequence of the values per band. Objective, per band B:
    sum_g ||L^T (W_{g,B} - W^_{g,B}) F_{g,B}||^2, with W_{g,B} the (D', 2 bands) key rows of
    head g in band B, F F^T the band's block of query_coherence (its cross-band
    blocks dropped) and L as in rotary_keys; minimiser: SVD of L^T [W_{g,B} F_{g,B}]_g."""
    d = query_weight.shape[0] // heads
    half = d // 2
    bands = _validate.integer(bands, "bands")
    if bands < 1 or half % bands:
        raise ValueError(f"bands must divide the {half} frequency pairs of a head, got {bands}")
    augment = query_bias is not None or key_bias is not None

    def augmented(weight, bias):
        w = weight.detach().to(torch.float64).cpu()
        if not augment:
            return w
        b = torch.zeros(w.shape[0], dtype=torch.float64) if bias is None else bias.detach().to(torch.float64).cpu()
        return torch.cat((w, b.unsqueeze(1)), dim=1)

    wq, wk = augmented(query_weight, query_bias), augmented(key_weight, key_bias)
    dim = wk.shape[1]
    for what, m in (("query_moment", query_moment), ("key_moment", key_moment)):
        if m is not None and tuple(m.shape) != (dim, dim):
            raise ValueError(f"{what} has shape {tuple(m.shape)}, expected ({dim}, {dim})")
    sq = None if query_moment is None else torch.as_tensor(query_moment, dtype=torch.float64)
    sk = None if key_moment is None else torch.as_tensor(key_moment, dtype=torch.float64)
    full = isinstance(key_values, str)
    eye = torch.eye(dim, dtype=torch.float64)
    chol = eye
    if not full and sk is not None:
        chol, info = torch.linalg.cholesky_ex(sk + damping * torch.trace(sk) / dim * eye)
        if info:
            raise ValueError("the key-side input moment is not positive definite; raise damping")
    coherence = dict(heads=heads, key_heads=key_heads, context=context)
    weights = query_coherence(wq, sq, inv_freq, **coherence)
    # Band B's columns: the key rows (g d + j, g d + d/2 + j), j in B, of every head g.
    cols = [torch.cat((j, j + half)) for j in torch.arange(half).view(-1, bands)]
    rows = [torch.cat([g * d + c for g in range(key_heads)]) for c in cols]

    def roots(p):
        return [torch.block_diag(*[_psd_root(p[g][c][:, c]) for g in range(key_heads)]) for c in cols]

    root = roots(weights)
    lefts, sigma = [], []
    for r, f in zip(rows, root):
        x = wk[r].T if full else chol.T @ wk[r].T @ f  # (D', 2 G bands)
        u, sv, _ = torch.linalg.svd(x, full_matrices=False)
        lefts.append(u)
        sigma.append(sv)
    sigma = torch.stack(sigma)  # (d/2/bands, 2 G bands)
    if full:
        ranks = (sigma > RANK_TOL * sigma.max()).sum(1)
    elif _validate.is_integer(key_values):
        top = torch.topk(sigma.flatten(), int(key_values)).indices
        ranks = torch.bincount(torch.div(top, sigma.shape[1], rounding_mode="floor"), minlength=sigma.shape[0])
    else:
        ranks = torch.as_tensor(key_values, dtype=torch.long)
        if ranks.shape != sigma.shape[:1] or bool((ranks < 0).any() or (ranks > sigma.shape[1]).any()):
            raise ValueError(f"ranks must be {sigma.shape[0]} integers from 0 to {sigma.shape[1]}, got {key_values}")
    # Latent L^-1-whitened projection on U_r: rho(y) = U_r^T L^-1 y', keys W^T L U_r rho.
    latent, expand = [], torch.zeros(wk.shape[0], int(ranks.sum()), dtype=torch.float64)
    approx, at = torch.zeros_like(wk), 0
    for r, u, k in zip(rows, lefts, ranks.tolist()):
        basis = u[:, :k]
        proj = torch.linalg.solve_triangular(chol.T, basis, upper=True)  # L^-T U_r: (D', k)
        back = wk[r] @ chol @ basis  # (2 G bands, k)
        latent.append(proj.T)
        expand[r, at:at + k] = back
        approx[r] = back @ proj.T
        at += k
    latent = torch.cat(latent) if latent else torch.zeros(0, dim, dtype=torch.float64)
    diff = wk - approx

    def ratio(p, moment):  # sqrt of sum_B tr(F^T D^T S D F) for D = the error, then the keys
        parts = []
        for m in (diff, wk):
            total = 0.0
            for r, fb in zip(rows, roots(p)):
                x = m[r].T @ fb
                total += float((x * (x if moment is None else moment @ x)).sum())
            parts.append(total)
        return math.sqrt(parts[0] / parts[1]) if parts[1] > 0 else 0.0

    data = None
    if sq is not None and sk is not None:
        data = ratio(weights, sk)
    return RotaryBandKeys(
        key_weight=latent[:, :-1] if augment else latent,
        key_bias=latent[:, -1] if augment else None,
        expand=expand,
        ranks=ranks,
        relative_error=ratio(query_coherence(wq, None, inv_freq, **coherence), None),
        data_error=data,
        singular_values=torch.zeros_like(sigma) if full else sigma,
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


def decode_flops(heads: int, key_heads: int, head_dim: int, key_values: int, bands: int) -> int:
    """Flops (a multiply-add counts two) of the scores of one new token against one
    cached token in one layer: 2 H C for bands == 1 (mixed queries against the cached
    rotated keys); for bands > 1 the rebuild 4 G bands C (2 G bands key coordinates per
    latent value), the rotation 3 G d (a complex product per pair) and 2 H d."""
    if bands == 1:
        return 2 * heads * key_values
    return 4 * key_heads * bands * key_values + 3 * key_heads * head_dim + 2 * heads * head_dim


def compress_rotary(model: nn.Module, shared_dim, calibration: Iterable | None = None, **options) -> list:
    """compress_model for rotary models (Llama, Qwen2, Mistral): replaces every
    attention layer in place by RotarySharedKeyAttention. `shared_dim`: "full" (the
    smallest exact size) or the number of key values cached per token and layer (at
    most the original G d; even for bands == 1: two per complex key). `calibration`
    (batches of model inputs) makes the objective data-aware. Options: `bands`
    (adjacent frequency pairs sharing keys, default 1; a divisor of d/2), `context`
    (bands > 1: the sequence length whose query-key offsets the objective averages,
    default 2048), `damping` (of the key-side moment, default 0.01) and `allocation`:
    "layer" (default: every layer caches `shared_dim` values) or "model" (`shared_dim`
    values per layer on average, spent where the model's largest singular values
    are). Returns one dict per layer; the model is unchanged on error."""
    config = model.config
    family = config.model_type
    layers = rotary_layers(model)
    heads, key_heads = config.num_attention_heads, config.num_key_value_heads
    d = layers[0][1].head_dim
    original = key_heads * d
    where = f"{type(model).__name__} ({family})"
    unknown = sorted(set(options) - {"damping", "allocation", "bands", "context"})
    if unknown:
        raise ValueError(f"option {unknown[0]!r} does not apply to rotary models (their options are bands, context, "
                         "damping and allocation)")
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
    moments = rotary_moments(model, layers, calibration, biased) if calibration is not None else {}

    def keys(name, module, key_values):
        stats = moments.get(name, (None, None))
        args = (module.q_proj.weight, module.q_proj.bias, module.k_proj.weight, module.k_proj.bias)
        common = dict(heads=heads, key_heads=key_heads, key_values=key_values, query_moment=stats[0],
                      key_moment=stats[0], damping=damping)
        try:
            if bands == 1:
                return rotary_keys(*args, **common)
            return rotary_band_keys(*args, inv_freq=inv_freq, bands=bands, context=context, **common)
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"{name} ({family}): {e}") from None

    budgets, spent = {name: shared_dim for name, _ in layers}, 0.0
    if allocation == "model" and shared_dim != "full":
        # The layers' objectives add up: keep the largest sigma^2 of the whole model.
        start = time.perf_counter()
        widest = [key_heads] * (d // 2) if bands == 1 else [2 * key_heads * bands] * (d // 2 // bands)
        sigma = torch.stack([keys(name, module, widest).singular_values for name, module in layers])
        top = torch.topk(sigma.flatten(), len(layers) * shared_dim // step).indices
        counts = torch.bincount(top, minlength=sigma.numel()).view(sigma.shape).sum(-1)  # (layers, bands)
        budgets = {name: counts[i].tolist() for i, (name, _) in enumerate(layers)}
        spent = (time.perf_counter() - start) / len(layers)
    built, report = {}, []
    for name, module in layers:
        start = time.perf_counter()
        stats = moments.get(name, (None, None))
        r = keys(name, module, budgets[name])
        key_values = step * int(r.ranks.sum())
        new = RotarySharedKeyAttention(module, key_values, heads, key_heads, d, r.key_bias is not None, family, bands)
        with torch.no_grad():
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
        qk_before = sum(p.numel() for p in (*module.q_proj.parameters(), *module.k_proj.parameters()))
        # Parameters that can be nonzero: for bands > 1 each latent value rebuilds 2 G bands keys.
        side = new.mixing.numel() if bands == 1 else 2 * key_heads * bands * key_values
        qk_after = sum(p.numel() for p in (*new.q_proj.parameters(), *new.key.parameters())) + side
        row = {"name": name, "key_values": key_values, "original_key_values": original, "bands": bands,
               "ranks": r.ranks.tolist(), "relative_error": r.relative_error, "data_error": r.data_error,
               "decode_flops": decode_flops(heads, key_heads, d, key_values, bands),
               "seconds": time.perf_counter() - start + spent,
               "params_before": qk_before, "params_after": qk_after}
        if stats[1] is not None:
            row["calibration_tokens"] = stats[1]
        report.append(row)
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            for name, module in layers:
                if child is module:
                    setattr(parent, child_name, built[name])
    values = [m.key_values for m in built.values()]
    setattr(config, ROTARY_CONFIG_KEY, {"family": family, "key_values": values[0] if len(set(values)) == 1 else values,
                                        "bands": bands})
    return report


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
    sizes = info["key_values"] if isinstance(info["key_values"], list) else [info["key_values"]] * len(layers)
    if len(sizes) != len(layers):
        raise ValueError(f"'{where}': {len(sizes)} key sizes recorded for {len(layers)} attention layers")
    config = model.config
    built = {name: RotarySharedKeyAttention(module, int(size), config.num_attention_heads,
                                            config.num_key_value_heads, module.head_dim,
                                            module.k_proj.bias is not None or module.q_proj.bias is not None,
                                            config.model_type, int(info.get("bands", 1)))
             for (name, module), size in zip(layers, sizes)}
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
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            for name, module in layers:
                if child is module:
                    setattr(parent, child_name, built[name])
    model.load_state_dict(tensors, strict=False)
    return model
