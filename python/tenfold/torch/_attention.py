"""The collaborative attention module (docs/attention.md, "The math").

Head h scores a query token x against a key token y as

    s_h(x, y) = x^T W~_Q diag(m_h) W~_K^T y + v_h^T y

with the 1/sqrt(d) of the original layer folded into the mixing m_h and the content
vectors v_h. The key side of a token is the same for every head: its shared key
W~_K^T y (width R) and its H content logits v_h^T y. That (R + H)-vector is what a
key/value cache stores on the key side, instead of the H d original keys.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .. import _validate


class CollaborativeScores(nn.Module):
    """The parameters of the collaborative form, named as the checkpoint names them
    under ``collab.``: ``mixing`` (H, R), ``query.weight`` (R, D), ``key.weight``
    (R, D), ``content_bias.weight`` (H, D)."""

    def __init__(
        self, input_dim: int, heads: int, shared_dim: int, *, content_bias: bool = True, dtype=None, device=None
    ):
        super().__init__()
        f = {"dtype": dtype, "device": device}
        self.heads = heads
        self.shared_dim = shared_dim
        self.mixing = nn.Parameter(torch.zeros(heads, shared_dim, **f))
        self.query = nn.Linear(input_dim, shared_dim, bias=False, **f)
        self.key = nn.Linear(input_dim, shared_dim, bias=False, **f)
        # Without a query bias the content vectors are zero: no parameter, no term.
        self.content_bias = nn.Linear(input_dim, heads, bias=False, **f) if content_bias else None

    def key_states(self, keys_in: torch.Tensor) -> torch.Tensor:
        """(B, n_k, D) -> (B, 1, n_k, R + H): shared keys W~_K^T y, then v_h^T y
        (width R alone without content vectors)."""
        if self.content_bias is None:
            return self.key(keys_in).unsqueeze(1)
        return torch.cat([self.key(keys_in), self.content_bias(keys_in)], dim=-1).unsqueeze(1)

    def head_queries(self, queries_in: torch.Tensor) -> torch.Tensor:
        """(B, n_q, D) -> (B, H, n_q, R + H): per-head queries W~_Q^T x * m_h, then the
        one-hot e_h that picks head h's content logit from the key state, so that one
        dot product with key_states gives s_h(x, y) (width R alone without content
        vectors)."""
        q = self.query(queries_in).unsqueeze(1) * self.mixing.unsqueeze(1)
        if self.content_bias is None:
            return q
        b, _, n_q, _ = q.shape
        pick = torch.eye(self.heads, dtype=q.dtype, device=q.device).view(1, self.heads, 1, self.heads)
        return torch.cat([q, pick.expand(b, -1, n_q, -1)], dim=-1)

    def forward(self, queries_in: torch.Tensor, key_states: torch.Tensor) -> torch.Tensor:
        """Scores (B, H, n_q, n_k) of the queries (B, n_q, D) against cached or fresh
        key states (B, 1, n_k, R + H)."""
        b, n_q, _ = queries_in.shape
        r = self.shared_dim
        # Per-head queries W~_Q^T x * m_h: (B, H, n_q, R).
        q = self.query(queries_in).unsqueeze(1) * self.mixing.unsqueeze(1)
        shared = key_states[:, 0, :, :r]  # (B, n_k, R), one for all heads
        content = key_states[:, 0, :, r:]  # (B, n_k, H)
        # One batched product over all heads: (B, H n_q, R) x (B, R, n_k).
        context = torch.bmm(q.reshape(b, self.heads * n_q, r), shared.transpose(1, 2))
        context = context.view(b, self.heads, n_q, -1)
        if content.shape[-1] == 0:
            return context
        return context + content.transpose(1, 2).unsqueeze(2)


def _positive(value, name: str) -> int:
    """`value` as a positive int (a Python or NumPy integer, not a bool)."""
    v = _validate.integer(value, name)
    if v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return v


def _apply_mask(scores: torch.Tensor, mask, causal: bool, where: str) -> torch.Tensor:
    """Applies the mask the model passes: additive float (eager), boolean with True =
    attend (sdpa), or None (no padding; causal layers then mask the future, the last
    n_q of n_k positions being the queries)."""
    lowest = torch.finfo(scores.dtype).min
    if mask is None:
        if not causal or scores.shape[-2] == 1:
            return scores
        n_q, n_k = scores.shape[-2:]
        i = torch.arange(n_q, device=scores.device).unsqueeze(1)
        j = torch.arange(n_k, device=scores.device).unsqueeze(0)
        return scores.masked_fill(j > i + (n_k - n_q), lowest)
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"{where}: attention mask of type {type(mask).__name__} is not supported "
            "(use the 'eager' or 'sdpa' attention implementation)"
        )
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, lowest)
    return scores + mask.to(scores.dtype)


class CollaborativeAttention(nn.Module):
    """Multi-head attention with collaborative queries and keys, trainable from
    scratch, following ``torch.nn.MultiheadAttention``'s conventions (docs/torch.md,
    "A layer of its own: training from scratch").

    ``embed_dim`` D, ``num_heads`` H, ``shared_dim`` R (the query/key width shared by
    all heads, D_k in the paper), ``head_dim`` d (each head's value width, default
    D / H). Parameters: ``collab`` (CollaborativeScores: mixing (H, R), query and key
    (R, D), content_bias (H, D) when ``bias``), ``value`` (H d, D) and ``out_proj``
    (D, H d), with biases when ``bias``. The score scale is folded into ``mixing`` and
    ``content_bias``. ``forward`` returns ``(output, weights)``, weights None unless
    ``need_weights``; with ``causal`` every call masks the future unless it passes
    ``is_causal=False``. It calls scaled_dot_product_attention off the CPU
    (``use_sdpa``). The layers that ``compress_model`` builds are of subclasses that
    keep the replaced module's interface.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        shared_dim: int,
        *,
        head_dim: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        batch_first: bool = True,
        causal: bool = False,
        dtype=None,
        device=None,
    ):
        super().__init__()
        embed_dim, num_heads, shared_dim = (_positive(v, name) for name, v in (
            ("embed_dim", embed_dim), ("num_heads", num_heads), ("shared_dim", shared_dim)))
        if head_dim is None:
            if embed_dim % num_heads:
                raise ValueError(
                    f"embed_dim ({embed_dim}) is not divisible by num_heads ({num_heads}); pass head_dim"
                )
            head_dim = embed_dim // num_heads
        else:
            head_dim = _positive(head_dim, "head_dim")
        dropout = _validate.number(dropout, "dropout")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        f = {"dtype": dtype, "device": device}
        self.embed_dim, self.num_heads, self.shared_dim, self.head_dim = embed_dim, num_heads, shared_dim, head_dim
        self.dropout = dropout
        self.batch_first = batch_first
        #: Whether every forward masks the future (query i sees keys j <= i), as
        #: ``is_causal=True`` does for one call.
        self.is_causal = bool(causal)
        #: Whether the forward calls scaled_dot_product_attention (None: off the CPU
        #: only; on the CPU sdpa runs its unfused fallback for these shapes, slower
        #: than the explicit products: docs/performance.md).
        self.use_sdpa: bool | None = None
        self.collab = CollaborativeScores(embed_dim, num_heads, shared_dim, content_bias=bias, **f)
        self.value = nn.Linear(embed_dim, num_heads * head_dim, bias=bias, **f)
        self.out_proj = nn.Linear(num_heads * head_dim, embed_dim, bias=bias, **f)
        self.reset_parameters()

    def reset_parameters(self, mixing_std: float = 0.2) -> None:
        """The initialisation of the paper's reference code: every projection as
        nn.Linear initialises it, mixing entries N(0, mixing_std^2), and the score
        scale 1 / sqrt(R / H) folded into mixing and content_bias. Random mixing
        makes each head a different weighting of all R shared dimensions from the
        first step (block ones would start as concatenated attention with R / H
        dimensions a head)."""
        c = self.collab
        for m in (c.query, c.key, c.content_bias, self.value, self.out_proj):
            if m is not None:
                m.reset_parameters()
        scale = (self.shared_dim / self.num_heads) ** -0.5
        with torch.no_grad():
            c.mixing.normal_(0.0, mixing_std * scale)
            if c.content_bias is not None:
                c.content_bias.weight.mul_(scale)

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, shared_dim={self.shared_dim}, "
            f"head_dim={self.head_dim}, dropout={self.dropout}, batch_first={self.batch_first}, "
            f"causal={self.is_causal}"
        )

    @classmethod
    def from_multihead_attention(cls, mha: nn.MultiheadAttention, shared_dim: int, **options):
        """A collaborative layer computing what ``mha`` computes, exactly at
        shared_dim = embed_dim, otherwise its query/key side compressed to R shared
        dimensions by ``tenfold.attention.compress`` (``options`` go to it: damping,
        init, n_iter_max, tol, random_state, backend, input_moment). Value and output
        projections, dropout and batch_first are copied; ``mha`` is not modified."""
        from .. import attention

        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"from_multihead_attention: mha must be a torch.nn.MultiheadAttention, "
                            f"got {type(mha).__name__}")
        if not mha._qkv_same_embed_dim:
            raise ValueError("from_multihead_attention: kdim/vdim different from embed_dim are not supported")
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("from_multihead_attention: add_bias_kv and add_zero_attn are not supported")
        e, h = mha.embed_dim, mha.num_heads
        w = mha.in_proj_weight.detach()
        b = None if mha.in_proj_bias is None else mha.in_proj_bias.detach()
        bias = b is not None
        # MultiheadAttention scales scores by 1/sqrt(d), the scale the adapter assumes.
        as_np = lambda t: t.to(device="cpu", dtype=torch.float64).numpy()  # noqa: E731
        res = attention.compress(as_np(w[:e]), as_np(w[e : 2 * e]), as_np(b[:e]) if bias else None,
                                 heads=h, shared_dim=shared_dim, **options)
        layer = cls(e, h, shared_dim, bias=bias, dropout=mha.dropout, batch_first=mha.batch_first,
                    dtype=w.dtype, device=w.device)
        with torch.no_grad():
            for name, value in res.items():
                if name == "collab.content_bias.weight" and not bias:
                    continue  # zero without a query bias; the layer has no such parameter
                target = layer.get_parameter(name)
                target.copy_(torch.tensor(np.asarray(value)).to(target))
            layer.value.weight.copy_(w[2 * e :])
            layer.out_proj.weight.copy_(mha.out_proj.weight)
            if bias:
                layer.value.bias.copy_(b[2 * e :])
                layer.out_proj.bias.copy_(mha.out_proj.bias)
        layer.train(mha.training)
        return layer

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        is_causal: bool | None = None,
        average_attn_weights: bool = True,
    ):
        """``query`` (B, L, D) (``batch_first``; (L, B, D) otherwise; (L, D) unbatched),
        ``key`` and ``value`` (B, S, D), default the query (self-attention). Masks as
        MultiheadAttention takes them: ``attn_mask`` (L, S) or (B H, L, S), boolean
        (True: may not attend) or additive float; ``key_padding_mask`` (B, S), boolean
        (True: padding) or additive float. ``is_causal``: query i sees keys j <= i
        (default: the layer's ``causal``; False turns it off for this call).
        Returns ``(output, weights)``; weights (B, L, S) averaged over heads, (B, H, L,
        S) with ``average_attn_weights=False``, or None unless ``need_weights``."""
        key = query if key is None else key
        value = key if value is None else value
        is_causal = self.is_causal if is_causal is None else bool(is_causal)
        unbatched = query.dim() == 2
        tensors = []
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != query.dim() or t.dim() not in (2, 3) or t.shape[-1] != self.embed_dim:
                raise ValueError(
                    f"CollaborativeAttention: {name} has shape {tuple(t.shape)}, expected "
                    f"({'L, ' if unbatched else 'B, L, ' if self.batch_first else 'L, B, '}{self.embed_dim})"
                )
            tensors.append(t.unsqueeze(0) if unbatched else t if self.batch_first else t.transpose(0, 1))
        query, key, value = tensors
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(
                f"CollaborativeAttention: query, key and value have batch/length "
                f"{tuple(query.shape[:2])}, {tuple(key.shape[:2])}, {tuple(value.shape[:2])}"
            )
        if unbatched and key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
        b, n_q, _ = query.shape
        n_k = key.shape[1]
        h = self.num_heads
        keys = self.collab.key_states(key)  # (B, 1, S, R + H), one for all heads
        v = self.value(value).view(b, n_k, h, self.head_dim).transpose(1, 2)
        fused = not need_weights and (self.use_sdpa if self.use_sdpa is not None else query.device.type != "cpu")
        mask = self._mask(attn_mask, key_padding_mask, is_causal, not fused, b, n_q, n_k, keys.dtype, keys.device)
        p = self.dropout if self.training else 0.0
        weights = None
        if fused:
            # Per-head queries (B, H, L, R + H) against the key states broadcast over
            # heads without a copy: q . k = s_h(x, y), the scale folded in.
            causal_only = is_causal and mask is None
            context = nn.functional.scaled_dot_product_attention(
                self.collab.head_queries(query), keys.expand(b, h, n_k, -1), v,
                attn_mask=None if causal_only else mask, dropout_p=p, is_causal=causal_only, scale=1.0)
        else:
            # Scores of all heads in one product against the shared keys, then
            # softmax(scores + mask) v.
            scores = self.collab(query, keys)
            if mask is not None:
                scores = scores + mask
            probs = nn.functional.dropout(torch.softmax(scores, dim=-1), p=p, training=self.training)
            context = probs @ v
            if need_weights:
                weights = probs.mean(dim=1) if average_attn_weights else probs
                weights = weights.squeeze(0) if unbatched else weights
        out = self.out_proj(context.transpose(1, 2).reshape(b, n_q, h * self.head_dim))
        out = out.squeeze(0) if unbatched else out if self.batch_first else out.transpose(0, 1)
        return out, weights

    def _mask(self, attn_mask, key_padding_mask, is_causal, explicit, b, n_q, n_k, dtype, device):
        """The masks as one additive float mask broadcastable to (B, H, L, S), or None
        when there is none, or only causality and sdpa applies it (not `explicit`)."""

        def additive(m, name, shapes):
            if tuple(m.shape) not in shapes:
                want = " or ".join(str(s) for s in shapes)
                raise ValueError(f"CollaborativeAttention: {name} has shape {tuple(m.shape)}, expected {want}")
            if m.dtype == torch.bool:
                return torch.zeros(m.shape, dtype=dtype, device=device).masked_fill_(m, float("-inf"))
            if not m.is_floating_point():
                raise TypeError(f"CollaborativeAttention: {name} must be boolean or floating point, got {m.dtype}")
            return m.to(dtype)

        h = self.num_heads
        mask = None
        if attn_mask is not None:
            m = additive(attn_mask, "attn_mask", [(n_q, n_k), (b * h, n_q, n_k)])
            mask = m.view(b, h, n_q, n_k) if m.dim() == 3 else m.view(1, 1, n_q, n_k)
        if key_padding_mask is not None:
            m = additive(key_padding_mask, "key_padding_mask", [(b, n_k)]).view(b, 1, 1, n_k)
            mask = m if mask is None else mask + m
        if is_causal and (mask is not None or explicit):
            future = torch.ones(n_q, n_k, dtype=torch.bool, device=device).triu_(1)
            causal = torch.zeros(n_q, n_k, dtype=dtype, device=device).masked_fill_(future, float("-inf"))
            mask = causal if mask is None else mask + causal
        return mask


class ConvertedCollaborativeAttention(CollaborativeAttention):
    """A transformers attention module replaced by collaborative attention.

    ``collab`` holds the collaborative parameters (CollaborativeScores); the value
    projection and, when given, the output projection are the original layer's
    modules, registered under the original names (``value_name``, ``output_name``) so
    that the state dict matches the checkpoint that ``tenfold attention compress``
    writes. ``forward(hidden_states, attention_mask=None, cache=None, **kwargs)``
    returns ``(output, probabilities)`` as the transformers attention modules do.
    """

    def __init__(
        self,
        input_dim: int,
        heads: int,
        head_dim: int,
        shared_dim: int,
        *,
        value: nn.Module,
        value_name: str = "value",
        output: nn.Module | None = None,
        output_name: str | None = None,
        dropout: float = 0.0,
        causal: bool = False,
        layer_idx: int | None = None,
        family: str = "",
        dtype=None,
        device=None,
    ):
        # Not the sizes-based constructor: the value and output modules are the
        # replaced module's own.
        nn.Module.__init__(self)
        if shared_dim < 1:
            raise ValueError(f"shared_dim must be >= 1, got {shared_dim}")
        self.input_dim, self.heads, self.head_dim = input_dim, heads, head_dim
        self.shared_dim = shared_dim
        self.dropout = dropout
        self.is_causal = causal
        self.layer_idx = layer_idx
        self.family = family
        self.collab = CollaborativeScores(input_dim, heads, shared_dim, dtype=dtype, device=device)
        self.value_name = value_name
        self.output_name = output_name
        self.add_module(value_name, value)
        if output is not None:
            self.add_module(output_name, output)

    def extra_repr(self) -> str:
        return (
            f"family={self.family!r}, heads={self.heads}, head_dim={self.head_dim}, "
            f"shared_dim={self.shared_dim}, causal={self.is_causal}"
        )

    def _finish(self, context: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        """Output path after the heads are merged: the output projection, if any."""
        if self.output_name is None:
            return context
        return getattr(self, self.output_name)(context)

    def forward(self, hidden_states: torch.Tensor, attention_mask=None, cache=None, **kwargs):
        b, n, _ = hidden_states.shape
        keys = self.collab.key_states(hidden_states)
        values = getattr(self, self.value_name)(hidden_states)
        values = values.view(b, n, self.heads, self.head_dim).transpose(1, 2)
        if cache is not None:
            # The key side of the cache holds (B, 1, n, R + H), the value side (B, H, n, d).
            keys, values = cache.update(keys, values, self.layer_idx)
        scores = self.collab(hidden_states, keys)
        scores = _apply_mask(scores, attention_mask, self.is_causal, f"{self.family} attention")
        probs = torch.softmax(scores, dim=-1)
        probs = nn.functional.dropout(probs, p=self.dropout, training=self.training)
        context = torch.matmul(probs, values).transpose(1, 2).reshape(b, n, -1)
        return self._finish(context, hidden_states), probs


class AlbertCollaborativeAttention(ConvertedCollaborativeAttention):
    """ALBERT's attention module also holds the output projection, its dropout and the
    residual LayerNorm: LayerNorm(x + dropout(dense(context)))."""

    def __init__(self, *args, output_dropout: nn.Module, layer_norm: nn.Module, **kwargs):
        super().__init__(*args, **kwargs)
        self.output_dropout = output_dropout
        self.LayerNorm = layer_norm

    def _finish(self, context, hidden_states):
        out = self.output_dropout(super()._finish(context, hidden_states))
        return self.LayerNorm(hidden_states + out)


class Gpt2CollaborativeAttention(ConvertedCollaborativeAttention):
    """GPT-2's attention: the value third of the fused ``c_attn`` (Conv1D, in x out) as
    ``value``, then ``c_proj`` and the residual dropout; causal, with the cache."""

    def __init__(self, *args, resid_dropout: nn.Module, **kwargs):
        super().__init__(*args, **kwargs)
        self.resid_dropout = resid_dropout

    def _finish(self, context, hidden_states):
        return self.resid_dropout(super()._finish(context, hidden_states))

    def forward(self, hidden_states, cache=None, attention_mask=None, **kwargs):
        if kwargs.get("encoder_hidden_states") is not None:
            raise ValueError("gpt2 attention: cross-attention is not supported in collaborative form")
        return super().forward(hidden_states, attention_mask=attention_mask, cache=cache)
