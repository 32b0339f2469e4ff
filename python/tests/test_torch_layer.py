"""tenfold.torch.CollaborativeAttention as a layer of its own: at full rank it computes
what torch.nn.MultiheadAttention computes (every mask form, both batch layouts, the
weights), its gradients agree with finite differences, the sdpa and explicit paths
agree, and bad input gets one clear error."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tenfold.torch as tt  # noqa: E402

E, H, L, S, B = 16, 4, 5, 7, 3


def make_mha(bias=True, batch_first=True, seed=0):
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=batch_first, dtype=torch.float64)
    if bias:  # nonzero biases, so that the content vectors matter
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha.eval()


def inputs(seed=1, batch_first=True):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, L, E, generator=g, dtype=torch.float64)
    kv = torch.randn(B, S, E, generator=g, dtype=torch.float64)
    if not batch_first:
        q, kv = q.transpose(0, 1), kv.transpose(0, 1)
    return q, kv


def masks():
    g = torch.Generator().manual_seed(2)
    padding = torch.zeros(B, S, dtype=torch.bool)
    padding[1, -2:] = True
    padding[2, 0] = True
    banned = torch.rand(L, S, generator=g) < 0.3
    banned[:, 0] = False  # every query keeps one key
    return {
        "none": {},
        "padding_bool": {"key_padding_mask": padding},
        "padding_float": {"key_padding_mask": torch.randn(B, S, generator=g, dtype=torch.float64)},
        "attn_bool": {"attn_mask": banned},
        "attn_float_3d": {"attn_mask": torch.randn(B * H, L, S, generator=g, dtype=torch.float64)},
        "both": {"attn_mask": banned, "key_padding_mask": padding},
    }


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("mask", sorted(masks()))
@pytest.mark.parametrize("bias", [True, False])
def test_full_rank_matches_multihead_attention(mask, bias, fused):
    mha = make_mha(bias=bias)
    layer = tt.CollaborativeAttention.from_multihead_attention(mha, E)
    layer.use_sdpa = fused
    assert (layer.collab.content_bias is not None) == bias
    q, kv = inputs()
    kw = masks()[mask]
    want, want_w = mha(q, kv, kv, need_weights=True, **kw)
    got, none = layer(q, kv, kv, **kw)
    assert none is None
    got_w_out, got_w = layer(q, kv, kv, need_weights=True, **kw)
    # float64: both sides round at ~1e-16 relative through a few products.
    np.testing.assert_allclose(got.detach(), want.detach(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_w_out.detach(), want.detach(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_w.detach(), want_w.detach(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("fused", [False, True])
def test_full_rank_self_attention_causal_and_sequence_first(fused):
    mha = make_mha(batch_first=False)
    layer = tt.CollaborativeAttention.from_multihead_attention(mha, E)
    layer.use_sdpa = fused
    assert layer.batch_first is False
    q, _ = inputs(batch_first=False)
    causal = torch.ones(L, L, dtype=torch.bool).triu(1)
    want, want_w = mha(q, q, q, attn_mask=causal, need_weights=True, average_attn_weights=False)
    got, _ = layer(q, is_causal=True)
    got_w_out, got_w = layer(q, is_causal=True, need_weights=True, average_attn_weights=False)
    assert got_w.shape == (B, H, L, L)
    np.testing.assert_allclose(got.detach(), want.detach(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_w_out.detach(), want.detach(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_w.detach(), want_w.detach(), rtol=0, atol=1e-12)
    # is_causal together with another mask: both apply.
    padding = torch.zeros(B, L, dtype=torch.bool)
    padding[0, 1] = True
    want, _ = mha(q, q, q, attn_mask=causal, key_padding_mask=padding)
    got, _ = layer(q, key_padding_mask=padding, is_causal=True)
    np.testing.assert_allclose(got.detach(), want.detach(), rtol=0, atol=1e-12)


def test_unbatched_input():
    mha = make_mha()
    layer = tt.CollaborativeAttention.from_multihead_attention(mha, E)
    q, kv = inputs()
    want, want_w = mha(q[0], kv[0], kv[0], need_weights=True)
    got, got_w = layer(q[0], kv[0], kv[0], need_weights=True)
    assert got.shape == (L, E) and got_w.shape == (L, S)
    np.testing.assert_allclose(got.detach(), want.detach(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_w.detach(), want_w.detach(), rtol=0, atol=1e-12)


def test_below_full_rank_uses_the_adapter_and_copies_value_output():
    mha = make_mha()
    r = E // 2
    layer = tt.CollaborativeAttention.from_multihead_attention(mha, r, n_iter_max=50)
    assert tuple(layer.collab.mixing.shape) == (H, r)
    assert torch.equal(layer.value.weight, mha.in_proj_weight[2 * E :])
    assert torch.equal(layer.out_proj.weight, mha.out_proj.weight)
    q, kv = inputs()
    with torch.no_grad():
        want = mha(q, kv, kv)[0]
        rel = float((layer(q, kv, kv)[0] - want).norm() / want.norm())
    assert 0 < rel < 1  # an approximation, not the exact layer and not unrelated to it


@pytest.mark.parametrize("path", ["sdpa", "explicit", "weights"])
def test_gradients_match_finite_differences(path):
    torch.manual_seed(3)
    layer = tt.CollaborativeAttention(8, 2, 6, head_dim=3, dtype=torch.float64)
    layer.use_sdpa = path == "sdpa"
    need_weights = path == "weights"
    x = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    y = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    names = [n for n, _ in layer.named_parameters()]

    def f(x, y, *ps):
        return torch.func.functional_call(layer, dict(zip(names, ps)), (x, y),
                                          {"key_padding_mask": padding, "need_weights": need_weights})[0]

    leaves = [p.detach().clone().requires_grad_(True) for p in layer.parameters()]
    assert torch.autograd.gradcheck(f, (x, y, *leaves), eps=1e-6, atol=1e-6)

    # Self-attention with the causal mask that sdpa applies itself.
    causal = lambda t: layer(t, is_causal=True, need_weights=need_weights)[0]  # noqa: E731
    z = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(causal, (z,), eps=1e-6, atol=1e-6)


def test_sdpa_and_explicit_paths_agree_in_float32():
    torch.manual_seed(4)
    layer = tt.CollaborativeAttention(32, 4, 12)
    x = torch.randn(2, 9, 32)
    padding = torch.zeros(2, 9, dtype=torch.bool)
    padding[1, 5:] = True
    for kw in ({}, {"is_causal": True}, {"key_padding_mask": padding, "is_causal": True}):
        layer.use_sdpa = True
        fast = layer(x, **kw)[0]
        layer.use_sdpa = False
        slow = layer(x, **kw)[0]
        # float32 sums of ~20 terms in two orders: a few units of 1e-7 relative.
        np.testing.assert_allclose(fast.detach(), slow.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fused", [False, True])
def test_a_causal_layer_masks_the_future_on_every_call(fused):
    torch.manual_seed(8)
    layer = tt.CollaborativeAttention(16, 4, 8, causal=True, dtype=torch.float64)
    plain = tt.CollaborativeAttention(16, 4, 8, dtype=torch.float64)
    plain.load_state_dict(layer.state_dict())
    layer.use_sdpa = plain.use_sdpa = fused
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    with torch.no_grad():
        out = layer(x)[0]
        torch.testing.assert_close(out, plain(x, is_causal=True)[0])
        torch.testing.assert_close(layer(x, is_causal=False)[0], plain(x)[0])
        # Changing the last position changes no earlier output.
        y = x.clone()
        y[:, -1] += 1.0
        changed = layer(y)[0]
    torch.testing.assert_close(changed[:, :-1], out[:, :-1])
    assert not torch.allclose(changed[:, -1], out[:, -1])
    assert "causal=True" in repr(layer)


def test_initialisation_follows_the_reference_scale():
    torch.manual_seed(5)
    layer = tt.CollaborativeAttention(64, 4, 256)
    # mixing ~ N(0, 0.2^2) with 1 / sqrt(R / H) = 1/8 folded in: std 0.025 over 1024 entries.
    std = float(layer.collab.mixing.detach().std())
    assert abs(std - 0.2 / math.sqrt(256 / 4)) < 0.1 * 0.025
    bound = 1 / math.sqrt(64)  # nn.Linear's uniform bound, times the folded 1/8
    assert float(layer.collab.content_bias.weight.detach().abs().max()) <= bound / 8
    assert float(layer.collab.query.weight.detach().abs().max()) <= bound


@pytest.mark.parametrize("fused", [False, True])
def test_dropout_only_in_training(fused):
    torch.manual_seed(6)
    layer = tt.CollaborativeAttention(16, 4, 8, dropout=0.5)
    layer.use_sdpa = fused
    x = torch.randn(2, 6, 16)
    layer.eval()
    assert torch.equal(layer(x)[0], layer(x)[0])
    layer.train()
    assert not torch.allclose(layer(x)[0], layer(x)[0])


def test_inputs_not_modified():
    layer = tt.CollaborativeAttention(16, 4, 8)
    q, kv = inputs()
    q, kv = q.float(), kv.float()
    padding = torch.zeros(B, S, dtype=torch.bool)
    copies = [t.clone() for t in (q, kv, padding)]
    layer(q, kv, kv, key_padding_mask=padding, need_weights=True)
    for before, after in zip(copies, (q, kv, padding)):
        assert torch.equal(before, after)


def test_numpy_sizes_are_integers_and_bad_scalars_are_named():
    a = tt.CollaborativeAttention(np.int64(16), np.int32(4), np.uint8(8), head_dim=np.int64(4),
                                  dropout=np.float32(0.25))
    b = tt.CollaborativeAttention(16, 4, 8, head_dim=4, dropout=0.25)
    assert a.extra_repr() == b.extra_repr() and type(a.shared_dim) is int
    with pytest.raises(TypeError, match=r"^shared_dim must be an int, got 8\.0 \(float\)$"):
        tt.CollaborativeAttention(16, 4, 8.0)
    with pytest.raises(TypeError, match="^num_heads must be an int, got the bool True$"):
        tt.CollaborativeAttention(16, True, 8)
    with pytest.raises(TypeError, match=r"^head_dim must be an int, got 4\.5 \(float\)$"):
        tt.CollaborativeAttention(16, 4, 8, head_dim=4.5)
    with pytest.raises(TypeError, match=r"^dropout must be a number, got '0\.1' \(str\)$"):
        tt.CollaborativeAttention(16, 4, 8, dropout="0.1")


def test_bad_input_is_refused_in_the_users_terms():
    with pytest.raises(ValueError, match="embed_dim .10. is not divisible by num_heads .4."):
        tt.CollaborativeAttention(10, 4, 8)
    with pytest.raises(ValueError, match="shared_dim must be a positive integer"):
        tt.CollaborativeAttention(16, 4, 0)
    with pytest.raises(ValueError, match="dropout must be in"):
        tt.CollaborativeAttention(16, 4, 8, dropout=1.0)
    layer = tt.CollaborativeAttention(16, 4, 8)
    with pytest.raises(ValueError, match=r"query has shape \(2, 5, 12\), expected \(B, L, 16\)"):
        layer(torch.randn(2, 5, 12))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(5, 4\), expected \(5, 5\) or \(8, 5, 5\)"):
        layer(torch.randn(2, 5, 16), attn_mask=torch.zeros(5, 4))
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(2, 4\), expected \(2, 5\)"):
        layer(torch.randn(2, 5, 16), key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="key_padding_mask must be boolean or floating point"):
        layer(torch.randn(2, 5, 16), key_padding_mask=torch.zeros(2, 5, dtype=torch.int64))
    with pytest.raises(TypeError, match="mha must be a torch.nn.MultiheadAttention, got Linear"):
        tt.CollaborativeAttention.from_multihead_attention(torch.nn.Linear(4, 4), 4)
    with pytest.raises(ValueError, match="kdim/vdim"):
        tt.CollaborativeAttention.from_multihead_attention(torch.nn.MultiheadAttention(16, 4, kdim=8), 8)
