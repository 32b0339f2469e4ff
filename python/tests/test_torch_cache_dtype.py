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
from test_torch_rotary import assert_round_trip, cache_bytes, generate_four, inputs, logits, make_rotary  # noqa: E402

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
    # decoding through the kernel gives torch's products on the same stored numbers
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, 64, (2, 30), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :5] = 0
    fast = decode_logits(model, ids, mask, [1, 1, 3])
    monkeypatch.setattr(LAYER, "reads_cache", lambda *args: False)
    slow = decode_logits(model, ids, mask, [1, 1, 3])
    assert float((fast - slow).norm() / slow.norm()) < 1e-5


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
