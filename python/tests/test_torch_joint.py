"""The joint K/V latent (compress_model(joint=True), docs/kv-cache.md): one latent per token
for keys and values, cached once; the keys rebuilt from it and rotated, the values read from
it. Exact at full size on random-weight tiny Llama (GQA, MQA, MHA), Qwen2 (biases) and
Mistral (sliding window) models (generation: test_torch_rotary.py); the fraction measured in the cache; the library's
objective checked in NumPy; round trips and refusals."""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tenfold")

import tenfold.attention as ta  # noqa: E402
import tenfold.torch as tt  # noqa: E402
from test_torch_rotary import (  # noqa: E402
    HEAD_DIM, assert_round_trip, cache_bytes, generate_four, greedy, inputs, logits, make_rotary, relative,
    rotary_modules)


@pytest.mark.parametrize("family,heads,key_heads,impl", [
    ("llama", 4, 2, "sdpa"), ("llama", 4, 1, "eager"), ("llama", 4, 4, "sdpa"),
    ("qwen2", 4, 2, "eager"), ("qwen2", 4, 2, "sdpa"), ("mistral", 4, 2, "sdpa"),
])
def test_full_is_exact_and_caches_the_latent_once(family, heads, key_heads, impl):
    # "full": the rank of [W_K, W_V F] (at most D' = 32 + bias: MHA's 2 G d = 64 keys and
    # values fit 32 latent values exactly). The key side of the cache holds the latent, the
    # value side nothing; decoding with it gives the logits of recomputation.
    model = make_rotary(family, heads, key_heads, impl)
    original = copy.deepcopy(model)
    ids, mask = inputs()
    before, tokens = logits(model, ids, mask), greedy(model, ids[:1, :6])
    report = tt.compress_model(model, shared_dim="full", joint=True)
    size = min(2 * key_heads * HEAD_DIM, 32)
    for row in report:
        assert row["key_values"] == row["value_values"] == size and row["joint"]
        assert row["relative_error"] < 1e-6 and row["value_error"] < 1e-6
    assert relative(logits(model, ids, mask), before, mask) < 1e-4
    assert torch.equal(greedy(model, ids[:1, :6]), tokens)
    assert model.config.tenfold_rotary == {"family": family, "key_values": size, "bands": HEAD_DIM // 2,
                                           "value_values": size, "joint": True}
    out, cache = generate_four(model)
    for layer in cache.layers:  # (Mistral's sliding window keeps fewer tokens)
        n = layer.keys.shape[2]
        assert tuple(layer.keys.shape) == (1, 1, n, size) and tuple(layer.values.shape) == (1, 1, n, 0)
    with torch.no_grad():
        full = model(out.sequences[:, :-1]).logits[:, -1]
    assert float((out.logits[-1] - full).norm() / full.norm()) < 1e-4
    _, base = generate_four(original)
    assert cache_bytes(cache) / cache_bytes(base) == pytest.approx(size / (2 * key_heads * HEAD_DIM))


def test_kv_cache_fraction_data_aware_and_saved(tmp_path):
    # kv_cache=0.5: one latent of 2 f G d = 16 values per token and layer, half the bytes of
    # the original's keys and values measured in the cache; both errors below the start.
    original = make_rotary("qwen2", seed=4)
    model = copy.deepcopy(original)
    ids, mask = inputs()
    before = logits(model, ids, mask)
    report = tt.compress_model(model, kv_cache=0.5, joint=True, calibration=[{"input_ids": ids, "attention_mask": mask}])
    assert all(r["key_values"] == r["value_values"] == 2 * HEAD_DIM for r in report)
    assert all(0 < r[k] < 1 for r in report for k in ("relative_error", "data_error", "value_error",
                                                        "value_data_error"))
    assert relative(logits(model, ids, mask), before, mask) > 1e-3  # the budget does change the model
    _, base = generate_four(original)
    _, small = generate_four(model)
    assert abs(cache_bytes(small) / cache_bytes(base) - 0.5) <= 0.01
    assert all(not m.folded for m in rotary_modules(model))  # 16 latent values rebuild before o_proj
    assert_round_trip(model, tmp_path)


def _root(w_o, heads, key_heads, d):
    """F_g with F_g F_g^T = sum_{h in g} W_O^h^T W_O^h (any root: the objective uses F F^T)."""
    per = heads // key_heads
    roots = []
    for g in range(key_heads):
        m = sum(w_o[:, h * d:(h + 1) * d].T @ w_o[:, h * d:(h + 1) * d] for h in range(g * per, (g + 1) * per))
        vals, vecs = np.linalg.eigh(m)
        roots.append(vecs * np.sqrt(np.clip(vals, 0, None)))
    return roots


@pytest.mark.parametrize("moment", [False, True])
def test_library_objective_is_the_dropped_singular_values(moment):
    # X = L^T [W_K^T / n_K, W_V^T blockdiag(F) / n_V]: the rebuilt keys' and values' relative
    # errors (in the whitened norm, the values through F) add up to the dropped sigma^2 of X
    # (each side of unit energy), and the reported errors are those of the returned maps.
    rng = np.random.default_rng(0)
    dim, heads, key_heads, d, e, c = 12, 4, 2, 3, 10, 5
    wk, wv = rng.standard_normal((key_heads * d, dim)), rng.standard_normal((key_heads * d, dim))
    wo = rng.standard_normal((e, heads * d))
    s = None
    if moment:
        x = rng.standard_normal((200, dim)) @ rng.standard_normal((dim, dim))
        s = x.T @ x / 200
    r = ta.value_latent(wv, wo, heads=heads, key_heads=key_heads, values=c, moment=s, damping=0.0,
                        key_weight=wk)
    a, bk, bv = r["latent"], r["key_expand"], r["expand"]
    assert a.shape == (c, dim) and bk.shape == bv.shape == (key_heads * d, c)
    chol = np.linalg.cholesky(s) if moment else np.eye(dim)
    roots = _root(wo, heads, key_heads, d)

    def energy(w):  # ||L^T W^T||^2 per side, the values through F
        return float(np.sum((chol.T @ w.T) ** 2))

    def weigh(w):
        return np.concatenate([w[g * d:(g + 1) * d].T @ roots[g] for g in range(key_heads)], axis=1).T

    key_error = energy(wk - bk @ a) / energy(wk)
    value_error = energy(weigh(wv - bv @ a)) / energy(weigh(wv))
    x = np.concatenate([chol.T @ wk.T / np.sqrt(energy(wk)), chol.T @ weigh(wv).T / np.sqrt(energy(weigh(wv)))],
                       axis=1)
    sigma = np.linalg.svd(x, compute_uv=False)
    assert key_error + value_error == pytest.approx(float(np.sum(sigma[c:] ** 2)), rel=1e-9)
    assert r["key_data_error" if moment else "key_error"] == pytest.approx(np.sqrt(key_error), rel=1e-9)
    assert r["data_error" if moment else "relative_error"] == pytest.approx(np.sqrt(value_error), rel=1e-9)
    np.testing.assert_allclose(r["singular_values"][:c], sigma[:c], rtol=1e-9)


def _coherence(wq, s, heads, key_heads, d, inv_freq, context):
    """P_g = sum_{h in g} sum_Delta w_Delta R_Delta M_h R_Delta^T, summed directly: M_h = W_h^T S W_h,
    R_Delta turning pair j (coordinates j, j + d/2) by theta_j Delta, w_Delta the share of the
    causal pairs of a `context`-token sequence at offset Delta."""
    half, per = d // 2, heads // key_heads
    weights = [(context - delta) / (context * (context + 1) / 2) for delta in range(context)]
    p = [np.zeros((d, d)) for _ in range(key_heads)]
    for h in range(heads):
        w = wq[h * d:(h + 1) * d].T
        m = w.T @ s @ w
        for delta, share in enumerate(weights):
            rot = np.zeros((d, d))
            for j in range(half):
                c, sn = np.cos(inv_freq[j] * delta), np.sin(inv_freq[j] * delta)
                rot[j, j], rot[j, j + half], rot[j + half, j], rot[j + half, j + half] = c, -sn, sn, c
            p[h // per] += share * rot @ m @ rot.T
    return p


@pytest.mark.parametrize("emphasis", [0.5, 2.5])
def test_keys_weighted_by_the_queries_drop_the_smallest_singular_values(emphasis):
    # With query_weight: X = L^T [a W_K^T blockdiag(P^(1/2)) / n_K, W_V^T blockdiag(F) / n_V],
    # P_g the queries' coherence summed here over every offset: the weighted errors of the
    # returned maps add up to the dropped sigma^2 of that X.
    rng = np.random.default_rng(3)
    dim, heads, key_heads, d, e, c, context = 14, 4, 2, 4, 10, 6, 9
    wq = rng.standard_normal((heads * d, dim))
    wk, wv = rng.standard_normal((key_heads * d, dim)), rng.standard_normal((key_heads * d, dim))
    wo = rng.standard_normal((e, heads * d))
    x = rng.standard_normal((300, dim)) @ rng.standard_normal((dim, dim))
    s = x.T @ x / 300
    inv_freq = np.array([0.9, 0.05])
    r = ta.value_latent(wv, wo, heads=heads, key_heads=key_heads, values=c, moment=s, damping=0.0,
                        key_weight=wk, query_weight=wq, key_emphasis=emphasis, inv_freq=inv_freq,
                        context=context)
    chol = np.linalg.cholesky(s)
    keys = [np.linalg.cholesky(pg + 1e-300 * np.eye(d)) for pg in _coherence(wq, s, heads, key_heads, d,
                                                                              inv_freq, context)]
    values = _root(wo, heads, key_heads, d)

    def side(w, roots):  # L^T W^T blockdiag(roots)
        return np.concatenate([chol.T @ w[g * d:(g + 1) * d].T @ roots[g] for g in range(key_heads)], axis=1)

    xk, xv = side(wk, keys), side(wv, values)
    nk, nv = np.linalg.norm(xk), np.linalg.norm(xv)
    sigma = np.linalg.svd(np.concatenate([emphasis * xk / nk, xv / nv], axis=1), compute_uv=False)
    np.testing.assert_allclose(r["singular_values"][:c], sigma[:c], rtol=1e-9)
    a = r["latent"]
    dropped = (emphasis * np.linalg.norm(side(wk - r["key_expand"] @ a, keys)) / nk) ** 2 + \
        (np.linalg.norm(side(wv - r["expand"] @ a, values)) / nv) ** 2
    assert dropped == pytest.approx(float(np.sum(sigma[c:] ** 2)), rel=1e-9)


def test_library_refuses_bad_key_weighting():
    rng = np.random.default_rng(1)
    wv, wo, wk = rng.standard_normal((8, 6)), rng.standard_normal((10, 16)), rng.standard_normal((8, 6))
    wq = rng.standard_normal((16, 6))
    common = dict(heads=4, key_heads=2, values=3, key_weight=wk)
    with pytest.raises(ValueError, match="key_emphasis"):
        ta.value_latent(wv, wo, key_emphasis=0.0, **common)
    with pytest.raises(ValueError, match="key_emphasis"):
        ta.value_latent(wv, wo, key_emphasis=float("nan"), **common)
    with pytest.raises(ValueError, match="inv_freq"):
        ta.value_latent(wv, wo, query_weight=wq, **common)
    with pytest.raises(ValueError, match="inv_freq"):
        ta.value_latent(wv, wo, query_weight=wq, inv_freq=[1.0, 0.5, 0.1], **common)
    with pytest.raises(ValueError, match="query_weight is"):
        ta.value_latent(wv, wo, query_weight=wq[:, :5], inv_freq=[1.0, 0.5], **common)
    with pytest.raises(ValueError, match="key_weight too"):
        ta.value_latent(wv, wo, heads=4, key_heads=2, values=3, query_weight=wq, inv_freq=[1.0, 0.5])


def test_auto_key_weighting_on_a_classifier():
    # A task head's logits (one score per class and sequence) serve "auto" as a language
    # model's next-token logits do.
    base = make_rotary("llama", seed=5)
    config = copy.deepcopy(base.config)
    config.num_labels, config.pad_token_id = 3, 0
    model = transformers.LlamaForSequenceClassification(config).eval()
    model.model.load_state_dict(base.model.state_dict())
    ids, mask = inputs()
    report = tt.compress_model(model, kv_cache=0.5, joint=True, key_weighting="auto",
                               calibration=[{"input_ids": ids, "attention_mask": mask}])
    assert report[0]["key_weighting"] in tt.rotary.KEY_WEIGHTINGS


def test_leading_prefixes_cut_rows_and_positions():
    # Rows of a batch in turn, each cut to its first `piece` positions, the mask and the
    # (1, n) position ids with it; until the tokens asked for are held.
    from tenfold.torch._calibration import leading_prefixes

    ids = torch.arange(30).view(3, 10)
    batch = {"input_ids": ids, "attention_mask": torch.ones(3, 10, dtype=torch.long),
             "position_ids": torch.arange(10).view(1, 10)}
    pieces = leading_prefixes([batch, batch], 12, piece=6)
    assert len(pieces) == 2
    for row, piece in enumerate(pieces):
        assert torch.equal(piece["input_ids"], ids[row : row + 1, :6])
        assert piece["attention_mask"].shape == (1, 6) and torch.equal(piece["position_ids"], torch.arange(6).view(1, 6))
    assert len(leading_prefixes([ids], 100, piece=4)) == 3  # a bare tensor batch: all its rows


def test_key_weighting_choices(tmp_path):
    # "none" is the objective without queries; a number weighs the keys by them (another
    # latent); "auto" with calibration keeps one of the candidates and says which; the
    # chosen model saves and loads as any joint model.
    ids, mask = inputs()
    calibration = [{"input_ids": ids, "attention_mask": mask}]
    errors = {}
    for weighting in ("none", 2.5, "auto"):
        model = make_rotary("qwen2", seed=4)
        report = tt.compress_model(model, kv_cache=0.5, joint=True, calibration=calibration, key_weighting=weighting)
        chosen = {r["key_weighting"] for r in report}
        assert len(chosen) == 1
        errors[weighting] = (chosen.pop(), report[0]["relative_error"])
    assert errors["none"][0] == "none" and errors[2.5][0] == 2.5
    assert errors["none"][1] != pytest.approx(errors[2.5][1], rel=1e-6)
    assert errors["auto"][0] in tt.rotary.KEY_WEIGHTINGS
    assert errors["auto"][1] == pytest.approx(errors[errors["auto"][0]][1], rel=1e-9)
    assert_round_trip(model, tmp_path)
    weight_only = make_rotary("qwen2", seed=4)
    assert tt.compress_model(weight_only, kv_cache=0.5, joint=True)[0]["key_weighting"] == "none"


@pytest.mark.parametrize("options,message", [
    (dict(kv_cache=0.5, joint=True, shared_dim=8), "kv_cache alone"),
    (dict(shared_dim=8, joint=True, value_dim=8), "value_dim does not apply to joint"),
    (dict(shared_dim=8, joint=True, bands=2), "bands does not apply to joint"),
    (dict(shared_dim=33, joint=True), "shared_dim"),
    (dict(shared_dim=0, joint=True), "shared_dim"),
    (dict(shared_dim=8, joint=1), "joint must be True or False"),
    (dict(joint=True), "shared_dim .* or kv_cache"),
    (dict(kv_cache=0.5, key_weighting=2.5), "key_weighting applies to joint"),
    (dict(kv_cache=0.5, joint=True, key_weighting=0), "key_weighting must be"),
    (dict(kv_cache=0.5, joint=True, key_weighting="best"), "key_weighting must be"),
    (dict(kv_cache=0.5, joint=True, key_weighting=True), "key_weighting must be"),
])
def test_bad_joint_options_are_refused_before_any_change(options, message):
    model = make_rotary("llama")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=message):
        tt.compress_model(model, **options)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert not hasattr(model.config, "tenfold_rotary")


def test_library_refuses_a_key_weight_of_another_shape():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match="key_weight is"):
        ta.value_latent(rng.standard_normal((6, 12)), rng.standard_normal((10, 12)), heads=4, key_heads=2,
                        values=3, key_weight=rng.standard_normal((6, 11)))
    with pytest.raises(ValueError, match="values"):
        ta.value_latent(rng.standard_normal((6, 12)), rng.standard_normal((10, 12)), heads=4, key_heads=2,
                        values=13, key_weight=rng.standard_normal((6, 12)))


def test_rotation_tables_are_shared_grown_and_usable_for_training():
    # The layers share one cos/sin table per RoPE; a longer request grows it, the values are
    # those of a fresh computation, and one made under inference_mode is remade for autograd.
    model = make_rotary("llama")
    tt.compress_model(model, kv_cache=0.5, joint=True)
    first, second = rotary_modules(model)
    with torch.inference_mode():
        c5, s5 = first.rotation(5, torch.float32, "cpu")
    c, s = second.rotation(12, torch.float32, "cpu")
    angles = torch.arange(12, dtype=torch.float32)[:, None] * first.inv_freq
    emb = torch.cat((angles, angles), dim=-1)
    torch.testing.assert_close(c, emb.cos(), rtol=0, atol=0)
    torch.testing.assert_close(s, emb.sin(), rtol=0, atol=0)
    torch.testing.assert_close(c5, c[:5], rtol=0, atol=0)
    assert not c.is_inference() and first.rotation(3, torch.float32, "cpu")[0].data_ptr() == c.data_ptr()
    ids, mask = inputs()
    model.train()
    model(input_ids=ids, attention_mask=mask).logits.sum().backward()
    assert first.expand.grad is not None


def test_rotation_follows_the_rope_buffers_when_they_change():
    # The layer reads inv_freq and attention_scaling once per version of the buffers: a
    # write in place, a replaced buffer and an inference tensor each give the new table.
    model = make_rotary("llama")
    tt.compress_model(model, kv_cache=0.5, joint=True)
    layer = rotary_modules(model)[0]

    def expected(count):
        angles = torch.arange(count, dtype=torch.float32)[:, None] * layer.inv_freq
        return torch.cat((angles, angles), dim=-1).cos() * layer.attention_scaling

    torch.testing.assert_close(layer.rotation(6, torch.float32, "cpu")[0], expected(6), rtol=0, atol=0)
    with torch.no_grad():
        layer.inv_freq.mul_(0.5)
    torch.testing.assert_close(layer.rotation(6, torch.float32, "cpu")[0], expected(6), rtol=0, atol=0)
    with torch.no_grad():
        layer.attention_scaling.fill_(2.0)
    torch.testing.assert_close(layer.rotation(6, torch.float32, "cpu")[0], expected(6), rtol=0, atol=0)
    layer.inv_freq = layer.inv_freq * 3
    torch.testing.assert_close(layer.rotation(6, torch.float32, "cpu")[0], expected(6), rtol=0, atol=0)
    with torch.inference_mode():
        layer.inv_freq = layer.inv_freq * 0.25
        torch.testing.assert_close(layer.rotation(6, torch.float32, "cpu")[0], expected(6), rtol=0, atol=0)


def test_distill_trains_the_joint_layers():
    # The latent (key), the keys' rebuild (expand) and the values' rebuild are what distill
    # trains; a few steps lower the loss towards the original.
    from tenfold.torch.distill import collaborative_parameters

    original = make_rotary("llama", seed=8)
    model = copy.deepcopy(original)
    tt.compress_model(model, kv_cache=0.5, joint=True)  # 16 latent values: rebuilt before o_proj
    want = [p for m in rotary_modules(model) for p in (m.key.weight, m.expand, m.value_expand)]
    assert [id(p) for p in collaborative_parameters(model)] == [id(p) for p in want]
    ids, mask = inputs()
    losses = tt.distill(model, original, [{"input_ids": ids, "attention_mask": mask}], steps=8, lr=1e-2, loss="kl")
    assert losses[-1] < losses[0]
