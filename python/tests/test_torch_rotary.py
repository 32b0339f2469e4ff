"""Shared rotary keys (tenfold.torch.rotary, docs/rope.md) on random-weight tiny
Llama, Qwen2 (query/key biases) and Mistral (sliding window) models: exact at
shared_dim="full" (logits and greedy generation), the cache holding the shared keys,
budgets below full, the data-aware objective, and the refusals."""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tenfold")

import tenfold.torch as tt  # noqa: E402
from tenfold.attention import value_expansion_folded  # noqa: E402
from torch_models import DIM, rotary_model  # noqa: E402

VOCAB, HEAD_DIM = 64, 8


def make_rotary(family, heads=4, key_heads=2, impl="sdpa", seed=0):
    extra = {"sliding_window": 8} if family == "mistral" else {}
    return rotary_model(family, head_dim=HEAD_DIM, heads=heads, key_heads=key_heads, impl=impl, seed=seed,
                        vocab=VOCAB, **extra)


def inputs(seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (2, 24), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :5] = 0  # left padding in the second row
    return ids, mask


def logits(model, ids, mask):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def greedy(model, ids):
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=20, do_sample=False, min_new_tokens=20, pad_token_id=0)


def relative(a, b, mask):
    m = mask.bool()
    return float((a[m] - b[m]).norm() / b[m].norm())


@pytest.mark.parametrize("family,heads,key_heads,impl", [
    ("llama", 4, 2, "sdpa"), ("llama", 4, 1, "eager"), ("llama", 4, 4, "sdpa"),
    ("qwen2", 4, 2, "eager"), ("qwen2", 4, 2, "sdpa"), ("mistral", 4, 2, "sdpa"), ("mistral", 4, 1, "eager"),
])
def test_full_is_exact(family, heads, key_heads, impl):
    model = make_rotary(family, heads, key_heads, impl)
    ids, mask = inputs()
    before, tokens = logits(model, ids, mask), greedy(model, ids[:1, :6])
    report = tt.compress_model(model, shared_dim="full")
    assert len(report) == 2
    for row in report:
        # The smallest exact size is the original key cache: rank G in every frequency.
        assert row["key_values"] == row["original_key_values"] == key_heads * HEAD_DIM
        assert row["ranks"] == [key_heads] * (HEAD_DIM // 2) and row["relative_error"] < 1e-6
    assert all(isinstance(m, tt.RotarySharedKeyAttention) for m in model.modules()
               if type(m).__name__.endswith("Attention") and m is not model)
    assert relative(logits(model, ids, mask), before, mask) < 1e-4
    assert torch.equal(greedy(model, ids[:1, :6]), tokens)
    assert model.config.tenfold_rotary == {"family": family, "key_values": key_heads * HEAD_DIM, "bands": 1}


@pytest.mark.parametrize("family,heads,key_heads,impl,bands", [
    ("llama", 4, 2, "sdpa", 2), ("llama", 4, 1, "eager", 4), ("llama", 4, 4, "sdpa", 2),
    ("qwen2", 4, 2, "eager", 2), ("mistral", 4, 2, "sdpa", 4),
])
def test_bands_full_is_exact(family, heads, key_heads, impl, bands):
    # Bands of several frequencies: a real latent per band, keys rebuilt and rotated
    # by their offset (left padding and the sliding window included).
    model = make_rotary(family, heads, key_heads, impl)
    ids, mask = inputs()
    before, tokens = logits(model, ids, mask), greedy(model, ids[:1, :6])
    report = tt.compress_model(model, shared_dim="full", bands=bands)
    for row in report:
        assert row["key_values"] == row["original_key_values"] == key_heads * HEAD_DIM and row["bands"] == bands
        assert row["ranks"] == [2 * key_heads * bands] * (HEAD_DIM // 2 // bands) and row["relative_error"] < 1e-6
    assert relative(logits(model, ids, mask), before, mask) < 1e-4
    assert torch.equal(greedy(model, ids[:1, :6]), tokens)
    assert model.config.tenfold_rotary == {"family": family, "key_values": key_heads * HEAD_DIM, "bands": bands}


def assert_round_trip(model, tmp_path):
    """save_pretrained, then tenfold.torch.from_pretrained: the same config entry and logits."""
    ids, mask = inputs()
    model.save_pretrained(tmp_path / "m")
    loaded = tt.from_pretrained(tmp_path / "m")
    assert loaded.config.tenfold_rotary == model.config.tenfold_rotary
    torch.testing.assert_close(logits(loaded, ids, mask), logits(model, ids, mask), rtol=1e-5, atol=1e-6)


def generate_four(model):
    """Four greedy tokens after a 6-token prompt, with the logits: (output, its cache)."""
    ids, _ = inputs()
    with torch.no_grad():
        out = model.generate(ids[:1, :6], max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0,
                             return_dict_in_generate=True, output_logits=True)
    return out, out.cache if hasattr(out, "cache") else out.past_key_values


def test_bands_cache_holds_the_latent():
    model = make_rotary("qwen2")
    tt.compress_model(model, shared_dim=5, bands=2)
    out, cache = generate_four(model)
    for layer in cache.layers:
        assert tuple(layer.keys.shape) == (1, 1, 9, 5)  # five latent values per token (any count: real)
    with torch.no_grad():
        full = model(out.sequences[:, :-1]).logits[:, -1]
    assert float((out.logits[-1] - full).norm() / full.norm()) < 1e-4


def _coherence(weight, moment, theta, *, heads, key_heads, context):
    """P_g = sum_{h in g} sum_Delta w(Delta) Rot(theta Delta) E[q q^T] Rot(theta Delta)^T,
    w(Delta) = (T - Delta) / (T (T + 1) / 2), by brute force over the offsets (E[q q^T] from
    the moment, or W W^T without one): the band objective's weight, from its definition."""
    d = weight.shape[0] // heads
    half = d // 2
    w = weight.double().view(heads, d, -1)
    m = w @ w.transpose(1, 2) if moment is None else w @ moment @ w.transpose(1, 2)
    p = torch.zeros(key_heads, d, d, dtype=torch.float64)
    for delta in range(context):
        c, s = torch.cos(theta.double() * delta), torch.sin(theta.double() * delta)
        rot = torch.zeros(d, d, dtype=torch.float64)  # (a, b) -> (a c - b s, b c + a s) per pair
        idx = torch.arange(half)
        rot[idx, idx], rot[idx, idx + half] = c, -s
        rot[idx + half, idx], rot[idx + half, idx + half] = s, c
        weight_delta = (context - delta) / (context * (context + 1) / 2)
        p += (rot @ m @ rot.T).view(key_heads, heads // key_heads, d, d).sum(1) * weight_delta
    return p


def _band_weights(model, moment, damping):
    """Layer 0's q/k weights and the band objective's pieces from their definitions:
    P = the offset-averaged query coherence (context 64) and the damped key moment S (I without one)."""
    layer = model.model.layers[0].self_attn
    theta = model.model.rotary_emb.inv_freq
    p = _coherence(layer.q_proj.weight.detach().double(), moment, theta, heads=4, key_heads=2, context=64)
    eye = torch.eye(DIM, dtype=torch.float64)
    s = eye if moment is None else moment + damping * torch.trace(moment) / DIM * eye
    return layer, theta, p, s


def _band_objective(weight, keys, p, s, bands):
    """sum over bands B and heads g of tr(E S E^T P_g[B, B]), E = the error of head g's
    key rows of band B (differentiable in `keys`)."""
    diff = weight - keys
    total = 0.0
    for j in torch.arange(HEAD_DIM // 2).view(-1, bands):
        cols = torch.cat((j, j + HEAD_DIM // 2))
        for g in range(2):
            e = diff[g * HEAD_DIM + cols]  # (2 bands, D)
            total = total + torch.trace(e @ s @ e.T @ p[g][cols][:, cols])
    return total


def test_band_keys_beat_a_brute_force_fit():
    # The closed form (SVD per band) against gradient descent on the same objective over
    # latent x expand factors of the same sizes, data-aware, on a tiny layer.
    model = make_rotary("llama", seed=3)
    ids, _ = inputs()
    layers = tt.rotary.rotary_layers(model)
    moment = tt.rotary.rotary_moments(model, layers, [ids], False)["model.layers.0.self_attn"][0]
    layer, theta, p, s = _band_weights(model, moment, 0.01)
    weight = layer.k_proj.weight.detach().double()
    ranks = [3, 1]
    r = tt.rotary_keys(layer.q_proj.weight, None, layer.k_proj.weight, None, heads=4, key_heads=2,
                                   key_values=ranks, inv_freq=theta, bands=2, context=64, query_moment=moment,
                                   key_moment=moment, damping=0.01)
    assert r.ranks.tolist() == ranks and 0 < r.data_error < 1
    best = float(_band_objective(weight, r.expand @ r.key_weight, p, s, 2))
    torch.manual_seed(0)
    factors = [(torch.randn(8, k, dtype=torch.float64, requires_grad=True),
                torch.randn(k, DIM, dtype=torch.float64, requires_grad=True)) for k in ranks]
    rows = [torch.cat([g * HEAD_DIM + torch.cat((j, j + 4)) for g in range(2)]) for j in torch.arange(4).view(-1, 2)]
    opt = torch.optim.LBFGS([t for f in factors for t in f], max_iter=300, tolerance_grad=1e-12,
                            tolerance_change=1e-15, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        keys = torch.zeros(2 * HEAD_DIM, DIM, dtype=torch.float64)
        for rw, (a, b) in zip(rows, factors):
            keys = keys.index_put((rw,), a @ b)
        total = _band_objective(weight, keys, p, s, 2)
        total.backward()
        return total

    for _ in range(3):
        opt.step(closure)
    brute = float(closure().detach())
    assert best <= brute * (1 + 1e-9)
    assert brute <= best * 1.01  # the descent finds the same minimum


def test_band_allocation_is_optimal_for_its_objective():
    # The largest sigma^2 over the bands: any other split of the same budget drops more.
    layer, theta, p, s = _band_weights(make_rotary("llama", seed=3), None, 0.0)
    args = (layer.q_proj.weight, None, layer.k_proj.weight, None)
    common = dict(heads=4, key_heads=2, inv_freq=theta, bands=2, context=64)
    best = tt.rotary_keys(*args, key_values=6, **common)
    assert int(best.ranks.sum()) == 6 and best.relative_error > 0.01
    for ranks in ([3, 3], [6, 0], [0, 6], [4, 2], [2, 4], [5, 1]):
        other = tt.rotary_keys(*args, key_values=ranks, **common)
        assert best.relative_error <= other.relative_error + 1e-12
    # The reported error is the objective's: its ratio recomputed from the definition.
    weight = layer.k_proj.weight.detach().double()
    err = float(_band_objective(weight, best.expand @ best.key_weight, p, s, 2))
    ref = float(_band_objective(weight, torch.zeros_like(weight), p, s, 2))
    assert abs(best.relative_error - (err / ref) ** 0.5) < 1e-10


def test_bands_model_allocation_and_save_pretrained(tmp_path):
    model = make_rotary("qwen2", seed=3)
    report = tt.compress_model(model, shared_dim=7, bands=2, allocation="model")
    assert sum(r["key_values"] for r in report) == 14
    assert all(r["decode_flops"] == 4 * 2 * 2 * r["key_values"] + 3 * 2 * HEAD_DIM + 2 * 4 * HEAD_DIM
               for r in report)
    assert_round_trip(model, tmp_path)


@pytest.mark.parametrize("side", ["q_proj", "k_proj"])
def test_full_is_exact_with_a_bias_on_one_side(side, tmp_path):
    # Only one side has a bias: the augmented input [y; 1] is used for both, and the
    # shared keys get a bias whenever the query has one (whitening mixes it in).
    model = make_rotary("qwen2")
    for layer in model.model.layers:
        getattr(layer.self_attn, side).bias = None
    ids, mask = inputs()
    before = logits(model, ids, mask)
    batches = [{"input_ids": ids, "attention_mask": mask}]
    tt.compress_model(model, shared_dim="full", calibration=batches)
    assert relative(logits(model, ids, mask), before, mask) < 1e-4
    model.save_pretrained(tmp_path / "m")
    fresh = transformers.Qwen2ForCausalLM(copy.deepcopy(model.config))
    for layer in fresh.model.layers:
        getattr(layer.self_attn, side).bias = None
    tt.rotary.load_rotary(fresh, tmp_path / "m")
    assert relative(logits(fresh.eval(), ids, mask), before, mask) < 1e-4


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_full_in_half_precision(dtype):
    # Converted in double from the half-precision weights, run in that precision: the
    # logits agree with the original's to the precision's rounding (unit round-off
    # 2^-11 / 2^-8, amplified through two layers).
    model = make_rotary("qwen2").to(dtype)
    ids, mask = inputs()
    reference = make_rotary("qwen2").to(dtype).double()  # the same rounded weights, in double
    exact = logits(reference, ids, mask)
    before = logits(model, ids, mask).double()
    tt.compress_model(model, shared_dim="full")
    assert model.model.layers[0].self_attn.key.weight.dtype == dtype
    after = logits(model, ids, mask).double()
    # The converted model is about as close to the exact logits as the original (1.2x
    # here: the shared keys add one rounding of the mixing).
    assert relative(after, exact, mask) < 2 * relative(before, exact, mask)


def test_cache_holds_the_shared_keys():
    model = make_rotary("llama")
    tt.compress_model(model, shared_dim=6)
    out, cache = generate_four(model)
    for layer in cache.layers:
        assert tuple(layer.keys.shape) == (1, 1, 9, 6)  # one shared key row per token: 6 values
        assert tuple(layer.values.shape) == (1, 2, 9, HEAD_DIM)
    with pytest.raises(ValueError, match="StaticLayer preallocates the original keys"):
        model.generate(inputs()[0][:1, :6], max_new_tokens=2, do_sample=False, pad_token_id=0,
                       cache_implementation="static")
    # Decoding with the cache agrees with recomputing the whole prefix.
    with torch.no_grad():
        full = model(out.sequences[:, :-1]).logits[:, -1]
    assert float((out.logits[-1] - full).norm() / full.norm()) < 1e-4


def test_below_full_spends_the_budget_on_the_largest_singular_values():
    model = make_rotary("qwen2")
    ids, mask = inputs()
    before = logits(model, ids, mask)
    errors = []
    for budget in (4, 8, 12, 16):
        m = copy.deepcopy(model)
        report = tt.compress_model(m, shared_dim=budget)
        assert all(r["key_values"] == budget and 2 * sum(r["ranks"]) == budget for r in report)
        errors.append(report[0]["relative_error"])
        if budget < 16:
            assert relative(logits(m, ids, mask), before, mask) > 1e-3
    assert errors[0] > errors[1] > errors[2] > 0.01 and errors[3] < 1e-6


def test_rank_allocation_is_optimal_for_the_weight_space_error():
    # Any other allocation of the same budget over the frequencies, each frequency
    # truncated by its own SVD of the query-weighted keys, drops at least as much.
    layer = make_rotary("llama").model.layers[0].self_attn
    best = tt.rotary_keys(layer.q_proj.weight, None, layer.k_proj.weight, None, heads=4, key_heads=2, key_values=8)
    assert sum(best.ranks.tolist()) == 4
    q = layer.q_proj.weight.detach().double().view(4, 2, 4, DIM)
    k = layer.k_proj.weight.detach().double().view(2, 2, 4, DIM)
    u, w = torch.complex(q[:, 0], q[:, 1]), torch.complex(k[:, 0], k[:, 1])
    weight = (u.abs() ** 2).sum(-1).view(2, 2, 4).sum(1)  # per group and frequency
    sigma = [torch.linalg.svdvals(w[:, j].T * weight[:, j].sqrt()) for j in range(4)]
    total = sum(float((s**2).sum()) for s in sigma)
    for ranks in ([1, 1, 1, 1], [2, 2, 0, 0], [0, 2, 0, 2], [2, 0, 1, 1]):
        dropped = sum(float((s[r:] ** 2).sum()) for s, r in zip(sigma, ranks))
        assert best.relative_error <= (dropped / total) ** 0.5 + 1e-12


def test_data_aware_minimises_the_data_error():
    # Undamped, the data-aware keys minimise the mean squared logit error on the
    # calibration tokens: damped (another objective) they cannot do better there.
    model = make_rotary("qwen2")
    ids, mask = inputs()
    batches = [{"input_ids": ids, "attention_mask": mask}, {"input_ids": inputs(2)[0]}]
    report = tt.compress_model(copy.deepcopy(model), shared_dim=8, calibration=batches, damping=0.0)
    layers = tt.rotary.rotary_layers(model)
    moments = tt.rotary.rotary_moments(model, layers, batches, True)
    assert all(r["calibration_tokens"] == int(mask.sum()) + ids.numel() for r in report)
    for row, (name, layer) in zip(report, layers):
        s = moments[name][0]
        args = (layer.q_proj.weight, layer.q_proj.bias, layer.k_proj.weight, layer.k_proj.bias)
        for damping in (0.1, 10.0):
            other = tt.rotary_keys(*args, heads=4, key_heads=2, key_values=8, query_moment=s, key_moment=s,
                                   damping=damping)
            assert row["data_error"] <= other.data_error + 1e-9
    assert tt.compress_model(model, shared_dim=8)[0]["data_error"] is None


def test_model_allocation_spends_the_budget_where_the_model_needs_it():
    model = make_rotary("llama", seed=3)
    layers = tt.rotary.rotary_layers(model)
    energy = [float((tt.rotary_keys(m.q_proj.weight, None, m.k_proj.weight, None, heads=4, key_heads=2,
                                    key_values=[2, 2, 2, 2]).singular_values ** 2).sum()) for _, m in layers]
    per_layer = tt.compress_model(copy.deepcopy(model), shared_dim=8)
    pooled = tt.compress_model(model, shared_dim=8, allocation="model")
    assert sum(r["key_values"] for r in pooled) == 16 and len({r["key_values"] for r in pooled}) == 2
    assert model.config.tenfold_rotary["key_values"] == [r["key_values"] for r in pooled]

    def dropped(report):  # the weight-space objective summed over the layers
        return sum(r["relative_error"] ** 2 * e for r, e in zip(report, energy))

    assert dropped(pooled) < dropped(per_layer)
    ids, _ = inputs()
    with torch.no_grad():
        out = model.generate(ids[:1, :6], max_new_tokens=3, min_new_tokens=3, do_sample=False, pad_token_id=0,
                             return_dict_in_generate=True)
    cache = out.cache if hasattr(out, "cache") else out.past_key_values
    assert [layer.keys.shape[-1] for layer in cache.layers] == [r["key_values"] for r in pooled]


def test_save_pretrained_and_from_pretrained(tmp_path):
    model = make_rotary("qwen2", seed=3)
    tt.compress_model(model, shared_dim=8, allocation="model")
    assert_round_trip(model, tmp_path)
    # A config that records other sizes than the tensors is refused, naming a tensor.
    config = copy.deepcopy(model.config)
    config.tenfold_rotary = {"family": "qwen2", "key_values": 4}
    fresh = transformers.Qwen2ForCausalLM(config)
    with pytest.raises(ValueError, match=r"tensor 'model\.layers\.0\.self_attn\.\w+(\.weight)?' has shape"):
        tt.rotary.load_rotary(fresh, tmp_path / "m")
    assert not any(isinstance(m, tt.RotarySharedKeyAttention) for m in fresh.modules())


@pytest.mark.parametrize("shared_dim,message", [
    (7, "even integer"), (0, "even integer"), (18, "exceeds the original key cache of 16"), ("half", "'full'"),
])
def test_refuses_bad_shared_dim(shared_dim, message):
    model = make_rotary("llama")
    with pytest.raises(ValueError, match=message):
        tt.compress_model(model, shared_dim=shared_dim)
    assert not any(isinstance(m, tt.RotarySharedKeyAttention) for m in model.modules())


def test_numpy_integers_are_integers():
    """shared_dim, bands and context are taken as operator.index takes them."""
    def rows(report):
        return [(r["key_values"], r["ranks"], r["relative_error"]) for r in report]

    assert rows(tt.compress_model(make_rotary("llama"), np.int64(8))) == rows(
        tt.compress_model(make_rotary("llama"), 8))
    assert rows(tt.compress_model(make_rotary("llama"), np.int32(6), bands=np.int64(2), context=np.uint16(64))) == rows(
        tt.compress_model(make_rotary("llama"), 6, bands=2, context=64))


@pytest.mark.parametrize("options, error, message", [
    (dict(shared_dim=8.0), TypeError, r"^shared_dim must be an int, got 8\.0 \(float\)$"),
    (dict(shared_dim=np.True_), TypeError, "^shared_dim must be an int, got the bool"),
    (dict(shared_dim=8, bands=2.0), TypeError, r"^bands must be an int, got 2\.0 \(float\)$"),
    (dict(shared_dim=8, bands=True), TypeError, "^bands must be an int, got the bool True$"),
    (dict(shared_dim=8, context="64"), TypeError, r"^context must be an int, got '64' \(str\)$"),
    (dict(shared_dim=8, damping="0.1"), TypeError, r"^damping must be a number, got '0\.1' \(str\)$"),
    (dict(shared_dim=8, damping=-0.5), ValueError, r"^damping must be finite and >= 0, got -0\.5$"),
])
def test_refuses_non_integers_and_non_numbers_naming_the_option(options, error, message):
    model = make_rotary("llama")
    with pytest.raises(error, match=message):
        tt.compress_model(model, **options)
    assert not any(isinstance(m, tt.RotarySharedKeyAttention) for m in model.modules())


def test_refuses_qk_norm_unknown_options_and_other_implementations():
    with pytest.raises(ValueError, match="q_norm, k_norm.*not a linear function"):
        tt.compress_model(make_rotary("qwen3"), shared_dim="full")
    with pytest.raises(ValueError, match="option 'n_iter_max' does not apply"):
        tt.compress_model(make_rotary("llama"), shared_dim="full", n_iter_max=3)
    with pytest.raises(ValueError, match="allocation must be 'layer' or 'model'"):
        tt.compress_model(make_rotary("llama"), shared_dim=8, allocation="head")
    with pytest.raises(ValueError, match="bands must be a positive divisor of the 4 frequency pairs"):
        tt.compress_model(make_rotary("llama"), shared_dim=8, bands=3)
    with pytest.raises(ValueError, match="even integer"):
        tt.compress_model(make_rotary("llama"), shared_dim=7)
    model = make_rotary("llama")
    model.model.rotary_emb.rope_type = "dynamic"
    with pytest.raises(ValueError, match="RoPE type 'dynamic' changes its frequencies"):
        tt.compress_model(model, shared_dim=8, bands=2)
    model = make_rotary("mistral")
    model.config._attn_implementation = "flex_attention"
    with pytest.raises(ValueError, match="implementation 'flex_attention' is not supported"):
        tt.compress_model(model, shared_dim="full")
    model = make_rotary("llama")
    tt.compress_model(model, shared_dim="full")
    with pytest.raises(ValueError, match="already has shared rotary keys"):
        tt.compress_model(model, shared_dim="full")


@pytest.mark.parametrize("family,bands", [("llama", 1), ("qwen2", 1), ("qwen2", 2), ("mistral", 2)])
def test_latent_values_at_full_size_are_exact(family, bands):
    # value_dim="full": one latent per token for all value heads, each head's values
    # rebuilt before the original o_proj (16 latent values: folding would multiply more
    # weights); the cache holds (B, 1, n, C_v) values.
    model = make_rotary(family)
    ids, mask = inputs()
    before = logits(model, ids, mask)
    report = tt.compress_model(model, shared_dim="full", bands=bands, value_dim="full")
    for row in report:
        assert row["value_values"] == row["original_value_values"] == 2 * HEAD_DIM and row["value_error"] < 1e-6
    assert relative(logits(model, ids, mask), before, mask) < 1e-4
    assert model.config.tenfold_rotary["value_values"] == 2 * HEAD_DIM
    assert all(not m.folded and m.o_proj.in_features == 4 * HEAD_DIM for m in rotary_modules(model))
    out, cache = generate_four(model)
    for layer in cache.layers:  # (Mistral's sliding window keeps fewer tokens)
        assert tuple(layer.values.shape) == (1, 1, layer.keys.shape[2], 2 * HEAD_DIM)
    with torch.no_grad():
        full = model(out.sequences[:, :-1]).logits[:, -1]
    assert float((out.logits[-1] - full).norm() / full.norm()) < 1e-4


def test_latent_values_below_full_data_aware_and_saved(tmp_path):
    model = make_rotary("qwen2", seed=3)
    ids, mask = inputs()
    before = logits(model, ids, mask)
    batches = [{"input_ids": ids, "attention_mask": mask}]
    report = tt.compress_model(model, shared_dim=8, calibration=batches, value_dim=6)
    assert all(r["value_values"] == 6 and 0 < r["value_error"] < 1 and 0 < r["value_data_error"] < 1
               for r in report)
    after = logits(model, ids, mask)
    assert relative(after, before, mask) > 1e-3  # the budget does change the model
    _, cache = generate_four(model)
    assert all(tuple(layer.values.shape) == (1, 1, 9, 6) for layer in cache.layers)
    assert_round_trip(model, tmp_path)


def rotary_modules(model):
    return [m for m in model.modules() if isinstance(m, tt.RotarySharedKeyAttention)]


@pytest.mark.parametrize("value_dim,folded", [(10, True), (11, False)])
def test_value_rebuild_folded_or_not_gives_the_same_layer(value_dim, folded):
    # C_v (E - d) <= d E folds (E = 32, d = 8: up to 10 latent values); otherwise each
    # head's B_g C_v -> d runs before the original o_proj. Folding by hand, W_O^h B_g(h)
    # per head, gives the same logits.
    model = make_rotary("llama", seed=6)
    ids, mask = inputs()
    tt.compress_model(model, shared_dim=8, value_dim=value_dim)
    layers = rotary_modules(model)
    assert all(m.folded == folded for m in layers)
    assert value_expansion_folded(value_dim, HEAD_DIM, DIM) == folded
    if folded:
        return
    before = logits(model, ids, mask)
    for m in layers:
        w_o = m.o_proj.weight.view(DIM, m.heads, HEAD_DIM)
        b = m.value_expand.view(m.key_heads, HEAD_DIM, value_dim)
        per = m.heads // m.key_heads
        w = torch.cat([w_o[:, h] @ b[h // per] for h in range(m.heads)], dim=1)  # (E, H C_v)
        m.o_proj = torch.nn.Linear(m.heads * value_dim, DIM, bias=False)
        with torch.no_grad():
            m.o_proj.weight.copy_(w)
        m.folded = True
        del m.value_expand
    assert relative(logits(model, ids, mask), before, mask) < 1e-5


@pytest.mark.parametrize("value_dim", [0, 17, "half", 2.5])
def test_bad_value_dim_is_refused_before_any_change(value_dim):
    model = make_rotary("llama")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises((ValueError, TypeError), match="value_dim"):
        tt.compress_model(model, shared_dim=8, value_dim=value_dim)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert not hasattr(model.config, "tenfold_rotary")


def cache_bytes(cache):
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


@pytest.mark.parametrize("bands", [1, 2])
def test_kv_cache_whole_is_exact(bands):
    # kv_cache=1: every key and value kept (G d each), so the layer is exact.
    model = make_rotary("llama", key_heads=2)
    ids, mask = inputs()
    before = logits(model, ids, mask)
    report = tt.compress_model(model, kv_cache=1.0, bands=bands)
    assert all(r["key_values"] == r["value_values"] == 2 * HEAD_DIM for r in report)
    assert relative(logits(model, ids, mask), before, mask) < 1e-4


def test_kv_cache_spends_the_fraction_measured_in_the_cache(tmp_path):
    # Half of the original K+V cache per token, measured from the dynamic cache after a
    # prefill against the original model's; with allocation "model" the sizes differ per
    # layer, but their sum is the budget.
    original = make_rotary("qwen2", seed=4)
    model = copy.deepcopy(original)
    ids, mask = inputs()
    batches = [{"input_ids": ids, "attention_mask": mask}]
    report = tt.compress_model(model, kv_cache=0.5, bands=2, calibration=batches, allocation="model")
    g_d = 2 * HEAD_DIM
    total = sum(r["key_values"] + r["value_values"] for r in report)
    assert total == len(report) * g_d  # 2 f G d per layer on average, f = 0.5
    _, base = generate_four(original)
    _, small = generate_four(model)
    assert abs(cache_bytes(small) / cache_bytes(base) - 0.5) <= 0.01
    assert_round_trip(model, tmp_path)


@pytest.mark.parametrize("options,message", [
    (dict(kv_cache=0), "kv_cache must be a fraction in"), (dict(kv_cache=1.5), "kv_cache must be a fraction in"),
    (dict(kv_cache=True), "kv_cache must be a fraction in"), (dict(kv_cache="half"), "kv_cache must be a fraction"),
    (dict(kv_cache=0.5, shared_dim=8), "give kv_cache alone"), (dict(kv_cache=0.5, value_dim=8), "kv_cache alone"),
    (dict(kv_cache=0.02), "too few"), (dict(), "shared_dim .* or kv_cache"),
])
def test_bad_kv_cache_is_refused_before_any_change(options, message):
    model = make_rotary("llama")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=message):
        tt.compress_model(model, **options)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert not hasattr(model.config, "tenfold_rotary")


@pytest.mark.parametrize("form", [dict(bands=1), dict(bands=2), dict(joint=True)])
def test_kv_cache_whole_generates_as_the_original(form):
    # Keys and values in the cache's compressed form at full size (bands of 1 or 2, or the
    # joint latent): greedy decoding of a left-padded batch, sampling and beam search give
    # the original's tokens, and the sdpa and eager paths of the converted layer agree
    # (eager returns the probabilities).
    original = make_rotary("llama", key_heads=2, seed=5)
    model = copy.deepcopy(original)
    tt.compress_model(model, kv_cache=1.0, **form)
    ids, mask = inputs()
    greedy_opts = dict(max_new_tokens=12, min_new_tokens=12, do_sample=False, pad_token_id=0)
    runs = {"greedy, left padding": dict(input_ids=ids, attention_mask=mask, **greedy_opts),
            "beam search": dict(input_ids=ids[:1, :8], num_beams=3, **greedy_opts),
            "sampling": dict(input_ids=ids[:1, :8], max_new_tokens=12, min_new_tokens=12, do_sample=True,
                             top_k=5, pad_token_id=0)}
    for what, opts in runs.items():
        outs = []
        for m in (original, model):
            torch.manual_seed(7)
            with torch.no_grad():
                outs.append(m.generate(**opts))
        assert torch.equal(outs[0], outs[1]), what
    sdpa, unmasked = logits(model, ids, mask), logits(model, ids, None)
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    assert relative(out.logits, sdpa, mask) < 1e-5
    assert relative(logits(model, ids, None), unmasked, torch.ones_like(mask)) < 1e-5
    assert all(a.shape == (2, 4, 24, 24) for a in out.attentions)
    torch.testing.assert_close(out.attentions[0].sum(-1), torch.ones(2, 4, 24))
