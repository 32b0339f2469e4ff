"""A bfloat16 cache for a float32 converted model (tenfold.torch.store_cache,
docs/kv-cache.md): what the converted layers cache is stored in bfloat16, half the bytes
measured in the cache; the logits are those of the same model whose cached numbers are
rounded to bfloat16 (with or without a cache, decoding through the library's kernel or
torch's products); save_pretrained / from_pretrained keep it; None goes back; refusals."""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tenfold")

import tenfold.torch as tt  # noqa: E402
from test_torch_cache_read import LAYER, decode_logits  # noqa: E402
from test_torch_rotary import (  # noqa: E402
    assert_round_trip, cache_bytes, generate_four, inputs, logits, make_rotary, relative)

FORMS = [dict(kv_cache=0.5), dict(kv_cache=0.5, joint=True), dict(kv_cache=0.5, bands=2), dict(shared_dim=8)]


def rounded(model):
    """A copy of `model` (float32) whose converted layers round what they cache to bfloat16
    where it is made (the rotated shared keys, the key latent, the values): the reference
    for store_cache."""
    copied = copy.deepcopy(model)

    def hook(module, args, out):
        return out.to(torch.bfloat16).to(out.dtype)

    for m in copied.modules():
        if isinstance(m, LAYER):
            if m.bands == 1:
                m.shared_keys = lambda *args, made=m.shared_keys: made(*args).to(torch.bfloat16).float()
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


@pytest.mark.parametrize("form", FORMS)
def test_bfloat16_cache_halves_the_bytes_and_rounds_only_the_cache(form, monkeypatch):
    model = make_rotary("llama")
    tt.compress_model(model, **form)
    reference = rounded(model)
    _, before = generate_four(model)
    ids, mask = inputs()
    wide = logits(model, ids, mask)
    assert tt.store_cache(model, torch.bfloat16) is model
    assert model.config.tenfold_rotary["cache_dtype"] == "bfloat16"
    full = logits(model, ids, mask)
    assert float((full - logits(reference, ids, mask)).norm() / full.norm()) < 1e-5
    assert float((full - wide).norm() / full.norm()) > 1e-5  # (bfloat16 keeps 8 significant bits)
    out, cache = generate_four(model)
    assert all(t.dtype == torch.bfloat16 for layer in cache.layers for t in (layer.keys, layer.values))
    assert cache_bytes(cache) * 2 == cache_bytes(before)
    assert_kernel_reads_as_torch(model, monkeypatch)


def test_bfloat16_cache_round_trips_and_none_restores(tmp_path):
    model = make_rotary("qwen2")
    tt.compress_model(model, kv_cache=0.5)
    ids, mask = inputs()
    wide = logits(model, ids, mask)
    tt.store_cache(model, torch.bfloat16)
    assert_round_trip(model, tmp_path)
    loaded = tt.from_pretrained(tmp_path / "m")
    assert all(m.cache_dtype == torch.bfloat16 for m in loaded.modules() if isinstance(m, LAYER))
    tt.store_cache(model, None)
    assert "cache_dtype" not in model.config.tenfold_rotary
    torch.testing.assert_close(logits(model, ids, mask), wide)


def test_store_cache_refusals():
    plain = make_rotary("llama")
    with pytest.raises(ValueError, match="no layers converted by compress_model"):
        tt.store_cache(plain, torch.bfloat16)
    model = make_rotary("llama")
    tt.compress_model(model, kv_cache=0.5)
    for bad in (torch.float16, torch.float32, "bfloat16"):
        with pytest.raises(ValueError, match="dtype must be torch.bfloat16 or None"):
            tt.store_cache(model, bad)
    with pytest.raises(ValueError, match="for float32 models.*float64"):
        tt.store_cache(model.double(), torch.bfloat16)
    assert "cache_dtype" not in model.config.tenfold_rotary


@pytest.mark.parametrize("joint", [False, True])
def test_kv_cache_counts_bfloat16_bytes(joint):
    # kv_cache=0.25 with a bfloat16 cache: the sizes of kv_cache=0.5, stored in half the
    # bytes, so a quarter of the original's cache bytes measured; 0.5 is exact (the logits
    # of the original up to bfloat16's rounding of the cache): the keys and values whole,
    # or the joint latent at full size.
    original = make_rotary("llama", key_heads=2)
    _, base = generate_four(original)
    ids, mask = inputs()
    sized = copy.deepcopy(original)
    tt.compress_model(sized, kv_cache=0.5, joint=joint)
    model = copy.deepcopy(original)
    report = tt.compress_model(model, kv_cache=0.25, joint=joint, cache_dtype=torch.bfloat16)
    assert [r["key_values"] for r in report] == [m.key_values for m in sized.modules() if isinstance(m, LAYER)]
    assert model.config.tenfold_rotary == dict(sized.config.tenfold_rotary, cache_dtype="bfloat16")
    _, cache = generate_four(model)
    assert cache_bytes(cache) / cache_bytes(base) == pytest.approx(0.25)
    exact = copy.deepcopy(original)
    tt.compress_model(exact, kv_cache=0.5, joint=joint, cache_dtype=torch.bfloat16)
    assert all(m.whole != joint for m in exact.modules() if isinstance(m, LAYER))
    assert relative(logits(exact, ids, mask), logits(original, ids, mask), mask) < 1e-2


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
    with pytest.raises(ValueError, match="cache_dtype must be torch.bfloat16 or None"):
        tt.compress_model(model, kv_cache=0.5, cache_dtype=torch.float16)
    with pytest.raises(ValueError, match="for float32 models.*float64"):
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
