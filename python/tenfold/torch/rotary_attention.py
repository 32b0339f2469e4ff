"""The PyTorch layer of rotary attention with shared keys (docs/rope.md): the module that
tenfold.torch's conversion puts in place of a Llama, Qwen2 or Mistral attention layer.
The keys it caches and how they are found are in tenfold.torch.rotary."""

from __future__ import annotations

import torch
from torch import nn

from .. import _tenfold
from ._attention import _apply_mask
from ._cache_dtype import as_stored
from ._cache import make_roomy


#: The most queries per call that read the cache through the library's kernel (reads_cache).
_CACHE_QUERIES = 8

#: cos and sin tables of the cache indices per (inv_freq, attention_scaling, dtype, device),
#: shared by the layers (RotarySharedKeyAttention.rotation).
_ROTATIONS: dict = {}


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[a, b] -> [-b, a] on the last axis: multiplication by i of the pairs (a_j, b_j)."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class RotarySharedKeyAttention(nn.Module):
    """A RoPE attention layer whose keys come from C shared values per token (docs/rope.md).

    ``bands == 1``: ``key`` (nn.Linear D -> C: real parts of the C/2 shared complex keys,
    then imaginary parts), ``mixing`` (G, C/2, 2): the complex c_{g,r}, and the buffer
    ``frequency`` (C/2,): the frequency pair j of each shared key. The key side of the
    cache holds the rotated shared keys, (B, 1, n, C), and every query head meets them
    through its mixed queries.

    ``bands > 1``: ``key`` (nn.Linear D -> C: a real latent, each value serving one band
    of `bands` adjacent frequencies), ``expand`` (G d, C): the latent -> key map (zero
    outside each value's band), and the buffers ``inv_freq`` (d/2,) and
    ``attention_scaling`` of the model's RoPE. The cache holds the unrotated latent
    (B, 1, n, C); the keys are rebuilt from it and rotated by their offset from the
    query (the index in the cache: positions of attended tokens must be consecutive).

    The value side of the cache is unchanged, (B, G, n, d), unless ``value_values`` C_v is
    given (docs/kv-cache.md): then ``value`` (nn.Linear D -> C_v) makes one latent per
    token that all value heads share, the cache holds it, (B, 1, n, C_v), and every head
    attends over it. Each head's C_v results become its d values by ``value_expand``
    (G d, C_v: B, rows g d ... of value head g) before the original ``o_proj``, or, when
    that multiplies more weights (``folded``, the library's value_expansion_folded),
    ``o_proj`` (nn.Linear H C_v -> E) has each head's B folded in.

    ``joint``: one latent for keys and values (docs/kv-cache.md): ``key`` makes it (C values
    per token, the only thing cached: the value side of the cache is empty, (B, 1, n, 0)),
    ``expand`` (G d, C) rebuilds the keys from it as for bands > 1 (one band of all d/2
    pairs), and the values are read from it as the latent values above (C_v = C).

    ``whole``: the original keys and values (``key`` is k_proj, D -> G d; the cache holds the
    G rotated key heads and the G value heads, (B, G, n, d)): the exact form of a cache
    stored in fewer bytes (``cache_dtype``), read by the library's kernel.

    ``cache_dtype`` (None: the model's own; set by tenfold.torch.store_cache): torch.bfloat16
    or torch.float8_e4m3fn stores what the layer caches in 16 or 8 bits; decoding a float32
    model on the CPU reads them so through the library's kernel, elsewhere they are widened
    to the model's precision when read."""

    def __init__(self, attention: nn.Module, key_values: int, heads: int, key_heads: int, head_dim: int,
                 key_bias: bool, family: str, bands: int = 1, value_values: int | None = None,
                 value_bias: bool = False, joint: bool = False, whole: bool = False):
        super().__init__()
        ref = attention.q_proj.weight
        self.q_proj, self.v_proj, self.o_proj = attention.q_proj, attention.v_proj, attention.o_proj
        if joint:  # one band of all pairs; the values read the key latent
            bands, value_values = head_dim // 2, key_values
        self.heads, self.key_heads, self.head_dim = heads, key_heads, head_dim
        self.key_values, self.bands, self.value_values, self.joint = key_values, bands, value_values, joint
        self.whole = whole
        self.folded = False
        self.cache_dtype = None
        if value_values is not None:
            out = attention.o_proj
            del self.v_proj
            if not joint:
                self.value = nn.Linear(ref.shape[1], value_values, bias=value_bias, dtype=ref.dtype,
                                       device=ref.device)
            self.folded = _tenfold.value_expansion_folded(value_values, head_dim, out.out_features)
            if self.folded:
                self.o_proj = nn.Linear(heads * value_values, out.out_features, bias=out.bias is not None,
                                        dtype=out.weight.dtype, device=out.weight.device)
            else:
                self.value_expand = nn.Parameter(torch.zeros(key_heads * head_dim, value_values, dtype=ref.dtype,
                                                             device=ref.device))
        self.scaling = float(getattr(attention, "scaling", head_dim**-0.5))
        self.attention_dropout = float(getattr(attention, "attention_dropout", 0.0))
        self.layer_idx = getattr(attention, "layer_idx", None)
        self.config = getattr(attention, "config", None)  # its _attn_implementation picks sdpa or eager
        self.is_causal = True
        self.family = family
        self.key = nn.Linear(ref.shape[1], key_values, bias=key_bias, dtype=ref.dtype, device=ref.device)
        if whole:
            pass  # the rotated queries meet the rotated keys as in the original layer
        elif bands == 1:
            self.mixing = nn.Parameter(torch.zeros(key_heads, key_values // 2, 2, dtype=ref.dtype, device=ref.device))
            self.register_buffer("frequency", torch.zeros(key_values // 2, dtype=torch.long, device=ref.device))
        else:
            self.expand = nn.Parameter(torch.zeros(key_heads * head_dim, key_values, dtype=ref.dtype,
                                                   device=ref.device))
            self.register_buffer("inv_freq", torch.zeros(head_dim // 2, dtype=torch.float32, device=ref.device))
            self.register_buffer("attention_scaling", torch.ones((), dtype=torch.float32, device=ref.device))

    def extra_repr(self) -> str:
        return (f"family={self.family!r}, heads={self.heads}, key_heads={self.key_heads}, "
                f"head_dim={self.head_dim}, key_values={self.key_values}, bands={self.bands}"
                + ("" if self.value_values is None else f", value_values={self.value_values}, folded={self.folded}")
                + (", whole=True" if self.whole else "")
                + (", joint=True" if self.joint else ""))

    def shared_keys(self, hidden_states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """(B, n, D) -> the rotated shared keys (B, 1, n, 2R): kappa_r(y) e^{i theta_j n}."""
        _, pairs = self._query_map()
        c, s = cos.index_select(-1, pairs), sin.index_select(-1, pairs)
        k = self.key(hidden_states)
        return (k * c + rotate_half(k) * s).unsqueeze(1)

    def mixed_queries(self, hidden_states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """(B, n, D) -> (B, H, n, 2R): the rotated query pair j of head h times
        conj(c_{g(h),r}) for every shared key r of frequency j (real parts, then imaginary),
        one product of each group's rotated queries with its map (_query_map)."""
        b, n, _ = hidden_states.shape
        q = self.rotated_heads(self.q_proj, hidden_states, self.heads, cos, sin)
        mixing, _ = self._query_map()
        # The heads of a group are adjacent: (B, H, n, d) is (B, G, H/G n, d).
        return torch.matmul(q.reshape(b, self.key_heads, -1, self.head_dim), mixing).view(b, self.heads, n, -1)

    def rotated_heads(self, projection: nn.Module, hidden_states: torch.Tensor, count: int, cos: torch.Tensor,
                      sin: torch.Tensor) -> torch.Tensor:
        """(B, n, D) -> the projection's `count` heads of d values, (B, count, n, d), each
        pair j turned by its position's angle: x e^{i theta_j n}."""
        b, n, _ = hidden_states.shape
        x = projection(hidden_states).view(b, n, count, self.head_dim).transpose(1, 2)
        return x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1)

    def _query_map(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(M (G, d, 2R), pairs (2R,)): M maps group g's rotated query (real parts of the d/2
        pairs, then imaginary) to its mixed query: (a + ib) conj(c_r) = (a c_r + b c_i) +
        i (b c_r - a c_i) for shared key r of pair j = frequency[r], a = Re q_j, b = Im q_j;
        pairs: the cos/sin column of each cached key value. Built from `mixing` and
        `frequency`; kept while they are unchanged and no gradient is recorded."""
        stamp = (self.mixing._version, self.mixing.data_ptr(), self.mixing.dtype, self.frequency._version,
                 self.frequency.data_ptr())
        differentiable = torch.is_grad_enabled() and self.mixing.requires_grad
        cached = getattr(self, "_map", None)
        if cached is not None and cached[0] == stamp and not differentiable:
            return cached[1]
        g, half, r = self.key_heads, self.head_dim // 2, self.key_values // 2
        cr, ci = self.mixing[..., 0], self.mixing[..., 1]  # (G, R)
        j, cols = self.frequency, torch.arange(r, device=self.frequency.device)
        m = self.mixing.new_zeros(g, self.head_dim, 2 * r)
        m[:, j, cols], m[:, half + j, cols] = cr, ci
        m[:, j, r + cols], m[:, half + j, r + cols] = -ci, cr
        built = (m, torch.cat((j, j)))
        if not differentiable:
            self._map = (stamp, built)
        return built

    def rotation(self, count: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (count, d) of the cache indices 0 .. count-1, as the model's RoPE
        computes them for positions (float32 angles, scaled, cast to `dtype`): views of one
        table per RoPE, dtype and device that all layers share, grown by doubling (every
        decode step reads it whole: computing it anew cost a quarter of a step's rebuild)."""
        key = (*self._rope_key(), dtype, torch.device(device))
        table = _ROTATIONS.get(key)
        # (a table made under inference_mode cannot be saved for backward outside it)
        if (table is None or table[0].shape[0] < count
                or table[0].is_inference() and not torch.is_inference_mode_enabled()):
            size = max(count, 2 * table[0].shape[0]) if table is not None else count
            angles = torch.arange(size, device=device, dtype=torch.float32)[:, None] * self.inv_freq.float()
            emb = torch.cat((angles, angles), dim=-1)
            table = ((emb.cos() * self.attention_scaling).to(dtype), (emb.sin() * self.attention_scaling).to(dtype))
            _ROTATIONS[key] = table
        return table[0][:count], table[1][:count]

    def _rope_key(self) -> tuple:
        """(inv_freq, attention_scaling) as Python numbers, read from the buffers again only
        when they were replaced or written to: reading a GPU tensor waits for the device,
        which at every layer of every decode step would keep the host from queuing work ahead.
        (Inference tensors keep no version counter: those are read every time.)"""
        buffers = (self.inv_freq, self.attention_scaling)
        state = None if any(t.is_inference() for t in buffers) else tuple((t, t._version) for t in buffers)
        memo = getattr(self, "_rope_memo", None)
        if state is None or memo is None or any(a is not b or u != v for (a, u), (b, v) in zip(memo[0], state)):
            memo = (state, (tuple(self.inv_freq.tolist()), float(self.attention_scaling)))
            if state is not None:
                self._rope_memo = memo
        return memo[1]

    def _check_cache(self, cache) -> None:
        """Only caches that grow with the tokens can hold shared keys: static ones
        preallocate (B, G, n, d) keys."""
        from transformers.cache_utils import DynamicLayer

        layers = getattr(cache, "layers", None)
        if layers is not None and self.layer_idx is not None and self.layer_idx < len(layers):
            if not isinstance(layers[self.layer_idx], DynamicLayer):
                raise ValueError(f"{self.family} attention with shared rotary keys: a "
                                 f"{type(layers[self.layer_idx]).__name__} preallocates the original keys; use the "
                                 "default dynamic cache")

    def forward(self, hidden_states: torch.Tensor, position_embeddings=None, attention_mask=None, cache=None,
                **kwargs):
        if cache is None:
            cache = kwargs.get("past_key_values")
        if position_embeddings is None:
            raise ValueError(f"{self.family} attention: no position_embeddings (cos, sin) were passed")
        cos, sin = position_embeddings
        if cos.shape[-1] != self.head_dim:
            raise ValueError(f"{self.family} attention: rotary embedding of width {cos.shape[-1]}, expected the "
                             f"head width {self.head_dim} (partial rotary embeddings are not supported)")
        b, n, _ = hidden_states.shape
        if self.whole:
            keys = self.rotated_heads(self.key, hidden_states, self.key_heads, cos, sin)
        elif self.bands == 1:
            keys = self.shared_keys(hidden_states, cos, sin)
        else:
            keys = self.key(hidden_states).unsqueeze(1)
        if self.joint:  # the latent, cached once on the key side
            values = keys[..., :0]
        elif self.value_values is None:
            values = self.v_proj(hidden_states).view(b, n, self.key_heads, self.head_dim).transpose(1, 2)
        else:  # one latent per token for all value heads: (B, 1, n, C_v)
            values = self.value(hidden_states).unsqueeze(1)
        if self.cache_dtype is not None:  # as stored, with or without a cache (the same logits)
            keys, values = as_stored(keys, self.cache_dtype), as_stored(values, self.cache_dtype)
        if cache is not None:
            self._check_cache(cache)
            make_roomy(cache, self.layer_idx)
            keys, values = cache.update(keys, values, self.layer_idx)
        if self.joint:
            values = keys
        if self.bands > 1 and keys.dtype != hidden_states.dtype:  # rebuilt in the model's precision
            keys, values = keys.to(hidden_states.dtype), values.to(hidden_states.dtype)
        if self.whole:
            queries = self.rotated_heads(self.q_proj, hidden_states, self.heads, cos, sin)
        elif self.bands == 1:
            queries = self.mixed_queries(hidden_states, cos, sin)
        else:
            # Keys rebuilt from the latent, then every token rotated by its cache index:
            # e^{i theta_j (m - n)} depends only on the offset.
            total = keys.shape[2]
            keys = torch.matmul(keys, self.expand.T).view(b, total, self.key_heads, self.head_dim).transpose(1, 2)
            c, s = self.rotation(total, keys.dtype, keys.device)
            keys = keys * c + rotate_half(keys) * s
            queries = self.q_proj(hidden_states).view(b, n, self.heads, self.head_dim).transpose(1, 2)
            queries = queries * c[total - n:] + rotate_half(queries) * s[total - n:]
        if keys.dtype != queries.dtype and not self.reads_cache(queries, keys, values):
            keys, values = keys.to(queries.dtype), values.to(queries.dtype)
        rebuild = self.value_values is not None and not self.folded
        if rebuild and self.sdpa(n) and not self.reads_cache(queries, keys, values):
            # Several queries: each value head's d values rebuilt from the latent first (G d C_v
            # per cached token), so that the fused attention runs at the original value width.
            total = values.shape[2]
            values = torch.matmul(values, self.value_expand.T).view(b, total, self.key_heads, -1).transpose(1, 2)
            rebuild = False
        context, probs = self.attend(queries, keys, values, attention_mask)  # (B, H, n, w)
        if rebuild:
            # head h's d values: B_g(h) times its C_v attended latent values, one product
            # per group (its heads adjacent: (B, H, n, C_v) is (B, G, H/G n, C_v))
            g = self.key_heads
            expand = self.value_expand.view(g, self.head_dim, self.value_values).transpose(-1, -2)
            context = torch.matmul(context.reshape(b, g, -1, self.value_values), expand).view(b, self.heads, n, -1)
        return self.o_proj(context.transpose(1, 2).reshape(b, n, -1)), probs

    def sdpa(self, n: int) -> bool:
        """torch's fused attention for n > 1 queries when the model asked for it ('sdpa')
        and no dropout runs. One query (decoding) takes the grouped matmuls, faster on the
        CPU than torch's kernel with a shared key head (docs/kv-cache.md). 'eager' returns
        the probabilities (output_attentions)."""
        impl = getattr(self.config, "_attn_implementation", None)
        return n > 1 and impl == "sdpa" and not (self.training and self.attention_dropout > 0)

    def reads_cache(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> bool:
        """Whether a few queries (decoding: at most ``_CACHE_QUERIES``) read the cache through the
        library's kernel (tenfold.cache_attention, docs/kv-cache.md): on the CPU, in float32 or
        float64, with no gradient to record, no dropout and no probabilities asked for (the
        'sdpa' implementation); keys and values in the queries' precision or, for float32
        queries, in bfloat16 or float8_e4m3fn. One pass over the cached tokens for all the heads that share
        them, where torch's products stream each operand through several passes."""
        impl = getattr(self.config, "_attn_implementation", None)
        return (queries.shape[2] <= _CACHE_QUERIES and impl == "sdpa" and queries.device.type == "cpu"
                and queries.dtype in (torch.float32, torch.float64) and keys.dtype == values.dtype
                and (keys.dtype == queries.dtype
                     or (queries.dtype == torch.float32 and keys.dtype in (torch.bfloat16, torch.float8_e4m3fn)))
                and not any(t.requires_grad for t in (queries, keys, values))
                and not (self.training and self.attention_dropout > 0))

    def cache_attention(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask) -> torch.Tensor:
        """attend's context by the library's kernel (reads_cache): a mask as the additive bias
        (B, 1, n, n_k) that _apply_mask makes of it, or none and causal for several queries."""
        b, h, n, _ = queries.shape
        bias = None
        if mask is not None:
            bias = _apply_mask(queries.new_zeros(b, 1, n, keys.shape[2]), mask, True, f"{self.family} attention")
        out = queries.new_empty(b, h, n, values.shape[-1])
        # on this thread alone: torch's threads spin on the other cores between the step's
        # operations, and waking the library's workers only took time from them (decode
        # steps 3 to 5 ms faster at 2,048 and 8,192 cached tokens, docs/kv-cache.md)
        _tenfold.cache_attention(queries, keys, values, bias, mask is None and n > 1, self.scaling, out,
                                 one_thread=True)
        return out

    def attend(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask):
        """(context (B, H, n, w), probabilities (B, H, n, n_k) or None): each head's
        softmax(q kᵀ scale + mask) v, the queries (B, H, n, k) against keys (B, K, n_k, k)
        and values (B, V, n_k, w) of K, V in {1, G} heads (head h reads head h // (H / K)),
        the shared heads never copied per query head."""
        b, h, n, width = queries.shape
        total, value_width = keys.shape[2], values.shape[-1]
        where = f"{self.family} attention"
        if self.reads_cache(queries, keys, values):
            return self.cache_attention(queries, keys, values, mask), None
        if self.sdpa(n):
            # torch's fused CPU kernel needs one width: zeros appended to the narrower side
            # change no score and no output column kept.
            wide = max(width, value_width)
            queries, keys, values = (nn.functional.pad(t, (0, wide - t.shape[-1])) for t in (queries, keys, values))
            heads = max(keys.shape[1], values.shape[1])
            keys, values = keys.expand(b, heads, total, wide), values.expand(b, heads, total, wide)
            causal = mask is None and n == total
            # Other masks as the eager path applies them (rows that padding masks whole stay finite).
            bias = None if causal else _apply_mask(queries.new_zeros(1, 1, n, total), mask, True, where)
            context = nn.functional.scaled_dot_product_attention(queries, keys, values, attn_mask=bias,
                                                                 is_causal=causal, scale=self.scaling,
                                                                 enable_gqa=heads < h)[..., :value_width]
            return context, None
        k, v = keys.shape[1], values.shape[1]
        # The heads of one key head are adjacent: (B, H, n, .) is (B, K, H/K n, .) as a view.
        scores = torch.matmul(queries.reshape(b, k, -1, width), keys.transpose(-1, -2))
        scores = _apply_mask(scores.view(b, h, n, total) * self.scaling, mask, True, where)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(queries.dtype)
        probs = nn.functional.dropout(probs, p=self.attention_dropout if self.training else 0.0,
                                      training=self.training)
        context = torch.matmul(probs.reshape(b, v, -1, total), values)  # (B, V, H/V n, w)
        return context.view(b, h, n, -1), probs
