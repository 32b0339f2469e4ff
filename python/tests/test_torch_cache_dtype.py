"""A bfloat16 or float8 cache for a converted model (tenfold.torch.store_cache,
docs/kv-cache.md): what the converted layers cache is stored in bfloat16 (float32 models,
half the bytes) or float8 e4m3 (a quarter of a float32 model's bytes, half of a bfloat16
one's), measured in the cache; the logits are those of the same model whose cached numbers
are rounded so (with or without a cache, decoding through the library's kernel or torch's
products); save_pretrained / from_pretrained keep it; None goes back; float8 saturates;
refusals."""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tenfold")

import tenfold.torch as tt  # noqa: E402
from tenfold.torch.rotary import keep_whole, rotary_layers  # noqa: E402
from test_torch_cache_read import LAYER, decode_logits  # noqa: E402
from test_torch_rotary import (  # noqa: E402
    assert_round_trip, cache_bytes, generate_four, inputs, logits, make_rotary, relative)

FORMS = [dict(kv_cache=0.5), dict(kv_cache=0.5, joint=True), dict(kv_cache=0.5, bands=2), dict(shared_dim=8)]


#: the cache dtypes of a float32 model and how many of their numbers fit one float32's bytes
STORED = [(torch.bfloat16, 2), (torch.float8_e4m3fn, 4)]


def rounded(model, dtype):
    """A copy of `model` (float32) whose converted layers round what they cache to `dtype`
    where it is made (the rotated shared keys, the key latent, the values): the reference
    for store_cache (its numbers far inside float8's range)."""
    copied = copy.deepcopy(model)

    def hook(module, args, out):
        return out.to(dtype).to(out.dtype)

    for m in copied.modules():
        if isinstance(m, LAYER):
            if m.whole:  # the rotated key heads (not the query heads)
                m.rotated_heads = lambda proj, *args, made=m.rotated_heads, key=m.key: (
                    made(proj, *args).to(dtype).float() if proj is key else made(proj, *args))
            elif m.bands == 1:
                m.shared_keys = lambda *args, made=m.shared_keys: made(*args).to(dtype).float()
            else:
                m.key.register_forward_hook(hook)
            for name in ("value", "v_proj"):
                if isinstance(getattr(m, name, None), torch.nn.Module):
                    getattr(m, name).register_forward_hook(hook)
    return copied


def assert_kernel_reads_as_torch(model, monkeypatch):
    """Decoding one and a few tokens (left padding in one row) through the library's kernel
    gives the logits of torch's products on the same stored numbers."""
    ids = torch.randint(0, 64, (2, 30), generator=torch.Generator().manual_seed(4))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0
    fast = decode_logits(model, ids, mask, [1, 1, 3])
    monkeypatch.setattr(LAYER, "reads_cache", lambda *args: False)
    slow = decode_logits(model, ids, mask, [1, 1, 3])
    monkeypatch.undo()
    assert float((fast - slow).norm() / slow.norm()) < 1e-5


@pytest.mark.parametrize("dtype,ratio", STORED)
@pytest.mark.parametrize("form", FORMS)
def test_cache_dtype_divides_the_bytes_and_rounds_only_the_cache(form, dtype, ratio, monkeypatch):
    model = make_rotary("llama")
    tt.compress_model(model, **form)
    reference = rounded(model, dtype)
    _, before = generate_four(model)
    ids, mask = inputs()
    wide = logits(model, ids, mask)
    assert tt.store_cache(model, dtype) is model
    assert model.config.tenfold_rotary["cache_dtype"] == str(dtype).removeprefix("torch.")
    full = logits(model, ids, mask)
    assert float((full - logits(reference, ids, mask)).norm() / full.norm()) < 1e-5
    assert float((full - wide).norm() / full.norm()) > 1e-5  # (8 or 4 significant bits kept)
    out, cache = generate_four(model)
    assert all(t.dtype == dtype for layer in cache.layers for t in (layer.keys, layer.values))
    assert cache_bytes(cache) * ratio == cache_bytes(before)
    assert_kernel_reads_as_torch(model, monkeypatch)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn])
def test_cache_dtype_round_trips_and_none_restores(dtype, tmp_path):
    model = make_rotary("qwen2")
    tt.compress_model(model, kv_cache=0.5)
    ids, mask = inputs()
    wide = logits(model, ids, mask)
    tt.store_cache(model, dtype)
    assert_round_trip(model, tmp_path)
    loaded = tt.from_pretrained(tmp_path / "m")
    assert all(m.cache_dtype == dtype for m in loaded.modules() if isinstance(m, LAYER))
    tt.store_cache(model, None)
    assert "cache_dtype" not in model.config.tenfold_rotary
    torch.testing.assert_close(logits(model, ids, mask), wide)


def test_store_cache_refusals():
    plain = make_rotary("llama")
    with pytest.raises(ValueError, match="no layers converted by compress_model"):
        tt.store_cache(plain, torch.bfloat16)
    model = make_rotary("llama")
    tt.compress_model(model, kv_cache=0.5)
    for bad in (torch.float16, torch.float32, torch.float8_e5m2, "bfloat16"):
        with pytest.raises(ValueError, match="dtype must be torch.bfloat16, torch.float8_e4m3fn or None"):
            tt.store_cache(model, bad)
    with pytest.raises(ValueError, match="cache_dtype bfloat16 is for float32 models; this model computes in "
                                         "float64"):
        tt.store_cache(model.double(), torch.bfloat16)
    with pytest.raises(ValueError, match="cache_dtype bfloat16 is for float32 models.*computes in bfloat16"):
        tt.store_cache(model.to(torch.bfloat16), torch.bfloat16)
    with pytest.raises(ValueError, match="float8_e4m3fn is for float32, bfloat16 and float16 models.*float64"):
        tt.store_cache(model.double(), torch.float8_e4m3fn)
    assert "cache_dtype" not in model.config.tenfold_rotary


@pytest.mark.parametrize("dtype,ratio", STORED)
@pytest.mark.parametrize("joint", [False, True])
def test_kv_cache_counts_the_stored_bytes(joint, dtype, ratio):
    # kv_cache=0.5/ratio with a cache of 1/ratio of the bytes: the sizes of kv_cache=0.5,
    # so that fraction of the original's cache bytes measured; 1/ratio is exact (the logits
    # of the original up to the rounding of the cache): the keys and values whole, or the
    # joint latent at full size.
    original = make_rotary("llama", key_heads=2)
    _, base = generate_four(original)
    ids, mask = inputs()
    sized = copy.deepcopy(original)
    tt.compress_model(sized, kv_cache=0.5, joint=joint)
    model = copy.deepcopy(original)
    report = tt.compress_model(model, kv_cache=0.5 / ratio, joint=joint, cache_dtype=dtype)
    assert [r["key_values"] for r in report] == [m.key_values for m in sized.modules() if isinstance(m, LAYER)]
    name = str(dtype).removeprefix("torch.")
    assert model.config.tenfold_rotary == dict(sized.config.tenfold_rotary, cache_dtype=name)
    _, cache = generate_four(model)
    assert cache_bytes(cache) / cache_bytes(base) == pytest.approx(0.5 / ratio)
    exact = copy.deepcopy(original)
    tt.compress_model(exact, kv_cache=1 / ratio, joint=joint, cache_dtype=dtype)
    assert all(m.whole != joint for m in exact.modules() if isinstance(m, LAYER))
    # the same form in float32 gives the original's logits; stored, those of its cache rounded
    full = copy.deepcopy(original)
    if joint:
        tt.compress_model(full, kv_cache=1, joint=True)
    else:
        keep_whole(full, rotary_layers(full))
    assert relative(logits(full, ids, mask), logits(original, ids, mask), mask) < 1e-4
    assert relative(logits(exact, ids, mask), logits(rounded(full, dtype), ids, mask), mask) < 1e-5


@pytest.mark.parametrize("family,key_heads", [("llama", 2), ("qwen2", 2), ("mistral", 1)])
def test_half_the_bytes_in_bfloat16_keeps_keys_and_values_whole(family, key_heads, tmp_path, monkeypatch):
    # kv_cache=0.5 with a bfloat16 cache: nothing dropped, the original's keys and values
    # (rotated keys, G heads each) stored in bfloat16; the original's logits up to that
    # rounding, half its cache bytes, the kernel's decode equal to torch's products.
    original = make_rotary(family, key_heads=key_heads)
    ids, mask = inputs()
    _, base = generate_four(original)
    model = copy.deepcopy(original)
    report = tt.compress_model(model, kv_cache=0.5, cache_dtype=torch.bfloat16)
    assert all(r["whole"] and r["key_values"] == key_heads * 8 for r in report)
    assert model.config.tenfold_rotary == {"family": family, "key_values": key_heads * 8, "bands": 1, "whole": True,
                                           "cache_dtype": "bfloat16"}
    assert relative(logits(model, ids, mask), logits(original, ids, mask), mask) < 1e-2
    _, cache = generate_four(model)
    for layer in cache.layers:
        assert layer.keys.dtype == layer.values.dtype == torch.bfloat16
        assert layer.keys.shape[1] == layer.values.shape[1] == key_heads
    assert cache_bytes(cache) / cache_bytes(base) == pytest.approx(0.5)
    assert_round_trip(model, tmp_path)
    assert_kernel_reads_as_torch(model, monkeypatch)


def test_kv_cache_with_bfloat16_refusals():
    model = make_rotary("llama")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"kv_cache 0.75 with cache_dtype=torch.bfloat16.*kv_cache <= 0.5"):
        tt.compress_model(model, kv_cache=0.75, cache_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"kv_cache 0.3 with cache_dtype=torch.float8_e4m3fn.*kv_cache <= 0.25"):
        tt.compress_model(model, kv_cache=0.3, cache_dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="cache_dtype must be torch.bfloat16, torch.float8_e4m3fn or None"):
        tt.compress_model(model, kv_cache=0.5, cache_dtype=torch.float16)
    with pytest.raises(ValueError, match="bfloat16 is for float32 models.*float64"):
        tt.compress_model(copy.deepcopy(model).double(), kv_cache=0.25, cache_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"kv_cache must be a fraction in \(0, 1\].*1.5"):
        tt.compress_model(model, kv_cache=1.5, cache_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="bands does not apply to kv_cache=0.5 with cache_dtype=torch.bfloat16"):
        tt.compress_model(model, kv_cache=0.5, bands=2, cache_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="give kv_cache alone"):
        tt.compress_model(model, 8, kv_cache=0.5, cache_dtype=torch.bfloat16)
    assert not hasattr(model.config, "tenfold_rotary")
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_float8_cache_halves_a_bfloat16_models_bytes(family, tmp_path):
    # a model that computes in bfloat16: kv_cache=0.5 with a float8 cache keeps every key
    # and value whole in half the bytes (widened to bfloat16 when read); 0.25 the sizes of 0.5
    original = make_rotary(family).to(torch.bfloat16)
    ids, mask = inputs()
    _, base = generate_four(original)
    model = copy.deepcopy(original)
    report = tt.compress_model(model, kv_cache=0.5, cache_dtype=torch.float8_e4m3fn)
    assert all(r["whole"] for r in report)
    _, cache = generate_four(model)
    assert all(t.dtype == torch.float8_e4m3fn for layer in cache.layers for t in (layer.keys, layer.values))
    assert cache_bytes(cache) / cache_bytes(base) == pytest.approx(0.5)
    # (float8 keeps 4 significant bits, bfloat16 8: the rounding of the cache dominates)
    assert relative(logits(model, ids, mask).float(), logits(original, ids, mask).float(), mask) < 0.1
    assert_round_trip(model, tmp_path)
    quarter = copy.deepcopy(original)
    tt.compress_model(quarter, kv_cache=0.25, cache_dtype=torch.float8_e4m3fn)
    _, cache = generate_four(quarter)
    assert cache_bytes(cache) / cache_bytes(base) == pytest.approx(0.25)


def test_float8_saturates_at_its_largest_number():
    from tenfold.torch._cache_dtype import as_stored

    x = torch.tensor([1000.0, -float("inf"), 448.0, 0.3, float("nan")])
    stored = as_stored(x, torch.float8_e4m3fn)
    assert stored.dtype == torch.float8_e4m3fn
    torch.testing.assert_close(stored[:4].float(), torch.tensor([448.0, -448.0, 448.0, 0.3125]))
    assert torch.isnan(stored[4].float())
    assert as_stored(x, None) is x
