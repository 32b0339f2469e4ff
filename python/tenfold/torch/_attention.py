"""The collaborative attention module (docs/attention.md, "The math").

Head h scores a query token x against a key token y as

    s_h(x, y) = x^T W~_Q diag(m_h) W~_K^T y + v_h^T y

with the 1/sqrt(d) of the original layer folded into the mixing m_h and the content
vectors v_h. The key side of a token is the same for every head: its shared key
W~_K^T y (width R) and its H content logits v_h^T y. That (R + H)-vector is what a
key/value cache stores on the key side, instead of the H d original keys.
"""

from __future__ import annotations

import torch
from torch import nn


class CollaborativeScores(nn.Module):
    """The parameters of the collaborative form, named as the checkpoint names them
    under ``collab.``: ``mixing`` (H, R), ``query.weight`` (R, D), ``key.weight``
    (R, D), ``content_bias.weight`` (H, D)."""

    def __init__(self, input_dim: int, heads: int, shared_dim: int, *, dtype=None, device=None):
        super().__init__()
        f = {"dtype": dtype, "device": device}
        self.heads = heads
        self.shared_dim = shared_dim
        self.mixing = nn.Parameter(torch.zeros(heads, shared_dim, **f))
        self.query = nn.Linear(input_dim, shared_dim, bias=False, **f)
        self.key = nn.Linear(input_dim, shared_dim, bias=False, **f)
        self.content_bias = nn.Linear(input_dim, heads, bias=False, **f)

    def key_states(self, keys_in: torch.Tensor) -> torch.Tensor:
        """(B, n_k, D) -> (B, 1, n_k, R + H): shared keys W~_K^T y, then v_h^T y."""
        return torch.cat([self.key(keys_in), self.content_bias(keys_in)], dim=-1).unsqueeze(1)

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
        return context + content.transpose(1, 2).unsqueeze(2)


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
    """Multi-head attention whose query/key side is collaborative.

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
        super().__init__()
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


class AlbertCollaborativeAttention(CollaborativeAttention):
    """ALBERT's attention module also holds the output projection, its dropout and the
    residual LayerNorm: LayerNorm(x + dropout(dense(context)))."""

    def __init__(self, *args, output_dropout: nn.Module, layer_norm: nn.Module, **kwargs):
        super().__init__(*args, **kwargs)
        self.output_dropout = output_dropout
        self.LayerNorm = layer_norm

    def _finish(self, context, hidden_states):
        out = self.output_dropout(super()._finish(context, hidden_states))
        return self.LayerNorm(hidden_states + out)


class Gpt2CollaborativeAttention(CollaborativeAttention):
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
