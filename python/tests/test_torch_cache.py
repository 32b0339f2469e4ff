"""The cache layer that appends decoded tokens in place (tenfold.torch._cache): the same
tensors as transformers' DynamicLayer after any sequence of updates, crops, beam
reorderings and batch selections, exact bytes after prefill, bounded spare room, and the
concatenating path where gradients or inference tensors forbid writing in place."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tenfold")

from transformers.cache_utils import DynamicCache, DynamicLayer  # noqa: E402

from tenfold.torch._cache import MIN_ROOM, RoomyLayer, make_roomy  # noqa: E402


def states(g, tokens, batch=2):
    return (torch.randn(batch, 1, tokens, 6, generator=g), torch.randn(batch, 1, tokens, 10, generator=g))


def test_same_tensors_as_the_dynamic_layer():
    g = torch.Generator().manual_seed(0)
    plain, roomy = DynamicLayer(), RoomyLayer()
    steps = [("update", 37)] + [("update", 1)] * 80 + [("crop", -5), ("update", 3), ("reorder", [1, 0]),
                                                       ("update", 1), ("select", [1]), ("update", 2)]
    with torch.no_grad():
        for what, arg in steps:
            if what == "update":
                k, v = states(g, arg, batch=plain.keys.shape[0] if plain.is_initialized else 2)
                a, b = plain.update(k, v), roomy.update(k, v)
                assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
            elif what == "crop":
                plain.crop(arg), roomy.crop(arg)
            elif what == "reorder":
                plain.reorder_cache(torch.tensor(arg)), roomy.reorder_cache(torch.tensor(arg))
            else:
                plain.batch_select_indices(torch.tensor(arg)), roomy.batch_select_indices(torch.tensor(arg))
            assert torch.equal(plain.keys, roomy.keys) and torch.equal(plain.values, roomy.values)
            assert roomy.get_seq_length() == plain.get_seq_length()


def test_prefill_is_exact_and_the_room_stays_under_an_eighth():
    g = torch.Generator().manual_seed(1)
    layer = RoomyLayer()
    with torch.inference_mode():
        layer.update(*states(g, 1000))
        assert layer._key_room.shape[-2] == 1000  # prefill: no spare room
        for n in range(1001, 1400):
            keys, _ = layer.update(*states(g, 1))
            capacity = layer._key_room.shape[-2]
            assert keys.shape[-2] == n and n <= capacity <= n + max(MIN_ROOM, n // 8)
            assert keys.data_ptr() == layer._key_room.data_ptr()  # a view: no copy per token


def test_gradients_and_inference_tensors_take_the_copying_path():
    g = torch.Generator().manual_seed(2)
    layer = RoomyLayer()
    with torch.inference_mode():
        layer.update(*states(g, 4))
    k, v = states(g, 1)
    with torch.no_grad():  # an inference-mode buffer cannot be written outside inference mode
        keys, _ = layer.update(k, v)
    assert not keys.is_inference() and torch.equal(keys[..., -1:, :], k)
    w = torch.randn(6, requires_grad=True)
    (k1, v1), (k2, v2) = states(g, 1), states(g, 1)
    first, _ = layer.update(k1 * w, v1)
    loss = first.pow(2).sum()  # saves `first` for backward
    second, _ = layer.update(k2 * w, v2)
    # concatenated, as DynamicLayer does: the second update leaves `first` as it was
    (loss + second.sum()).backward()
    torch.testing.assert_close(w.grad, ((2 * k1 * w + 1) * k1 + k2).sum(dim=(0, 1, 2)))


def test_make_roomy_changes_only_plain_dynamic_layers():
    cache = DynamicCache()
    cache.update(*states(torch.Generator().manual_seed(3), 3), layer_idx=0)
    make_roomy(cache, 0), make_roomy(cache, 5), make_roomy(cache, None)
    assert type(cache.layers[0]) is RoomyLayer
