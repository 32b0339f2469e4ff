"""Reading the compressed cache at decode time through the library's kernel
(tenfold.torch.RotarySharedKeyAttention.reads_cache, docs/kv-cache.md): decoding one and a
few tokens at a time, with and without left padding, gives the logits of torch's own
products; the kernel serves the shared keys with latent, grouped or joint values; it is
left alone where a gradient is recorded or probabilities are asked for; and its
refusals name the argument."""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tenfold")

import tenfold.torch as tt  # noqa: E402
from tenfold import _tenfold  # noqa: E402
from tenfold.torch import rotary_attention  # noqa: E402
from torch_models import rotary_model  # noqa: E402

VOCAB, HEAD_DIM = 64, 8
LAYER = rotary_attention.RotarySharedKeyAttention


@pytest.fixture
def kernel_calls(monkeypatch):
    """The number of calls of the kernel, counted."""
    calls = []
    real = _tenfold.cache_attention

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        # the layer computes on the calling thread alone (torch's threads hold the others)
        assert kwargs == {"one_thread": True}
        return real(*args, **kwargs)

    monkeypatch.setattr(rotary_attention._tenfold, "cache_attention", counted)
    return calls


def decode_logits(model, ids, mask, steps):
    """Prefill of ids, then `steps` (one or several tokens each) fed with the cache: the
    logits of every fed token."""
    from transformers import DynamicCache

    cache, out = DynamicCache(config=model.config), []
    with torch.no_grad():
        prefill = ids.shape[1] - sum(steps)
        model(input_ids=ids[:, :prefill], attention_mask=mask[:, :prefill], cache=cache, use_cache=True)
        at = prefill
        for n in steps:
            r = model(input_ids=ids[:, at:at + n], attention_mask=mask[:, :at + n], cache=cache, use_cache=True)
            out.append(r.logits)
            at += n
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("form", [dict(kv_cache=0.5), dict(kv_cache=0.5, joint=True),
                                  dict(shared_dim=8), dict(kv_cache=0.5, dtype=torch.float64)])
def test_kernel_gives_the_logits_of_torchs_products(form, monkeypatch, kernel_calls):
    form = dict(form)
    dtype = form.pop("dtype", torch.float32)
    model = rotary_model("llama", head_dim=HEAD_DIM, heads=4, key_heads=2, seed=3, vocab=VOCAB).to(dtype)
    tt.compress_model(model, **form)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, VOCAB, (2, 40), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :7] = 0  # left padding in the second row
    steps = [1, 1, 3, 1, 8]  # one token at a time, and a few (causal within the step)
    fast = decode_logits(model, ids, mask, steps)
    assert len(kernel_calls) == 2 * len(steps)  # two layers per step
    monkeypatch.setattr(LAYER, "reads_cache", lambda *args: False)
    slow = decode_logits(model, ids, mask, steps)
    # (torch's path takes the softmax in float32 for float64 models too)
    assert float((fast - slow).norm() / slow.norm()) < 1e-5


def test_kernel_left_alone_for_gradients_probabilities_and_long_steps(kernel_calls):
    model = rotary_model("llama", head_dim=HEAD_DIM, heads=4, key_heads=2, seed=3, vocab=VOCAB)
    tt.compress_model(model, kv_cache=0.5)
    ids = torch.randint(0, VOCAB, (1, 12), generator=torch.Generator().manual_seed(5))
    model(input_ids=ids[:, :1]).logits.sum().backward()  # a gradient recorded
    with torch.no_grad():
        model(input_ids=ids)  # more queries than a decode step
        eager = copy.deepcopy(model)
        eager.config._attn_implementation = "eager"
        eager(input_ids=ids[:, :1], output_attentions=True)
    assert kernel_calls == []
    with torch.no_grad():
        model(input_ids=ids[:, :1])
    assert len(kernel_calls) == 2


def test_kernel_refusals_name_the_argument():
    q, k, v = torch.zeros(1, 4, 1, 8), torch.zeros(1, 1, 5, 8), torch.zeros(1, 1, 5, 6)
    out = torch.empty(1, 4, 1, 6)
    with pytest.raises(ValueError, match="keys' width"):
        _tenfold.cache_attention(q, torch.zeros(1, 1, 5, 7), v, None, False, 1.0, out)
    with pytest.raises(ValueError, match="values must be float32"):
        _tenfold.cache_attention(q, k, v.double(), None, False, 1.0, out)
    with pytest.raises(ValueError, match="contiguous along its last axis"):
        _tenfold.cache_attention(q, torch.zeros(1, 1, 8, 5).transpose(-1, -2), v, None, False, 1.0, out)
    with pytest.raises(ValueError, match="4-D"):
        _tenfold.cache_attention(q[0], k, v, None, False, 1.0, out)
    _tenfold.cache_attention(q, k, v, None, False, 1.0, out)
    torch.testing.assert_close(out, torch.zeros(1, 4, 1, 6))


def test_read_kernel_benchmark_runs_and_restores_the_layer():
    # bench/kv_cache/read_kernel.py at a tiny size: the kernel agrees with torch's products,
    # every figure is a time, and the layer's methods are its own again afterwards
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench" / "kv_cache"))
    import read_kernel

    alone = read_kernel.alone(300, 1)
    assert alone["max_difference"] < 1e-5 and alone["torch"] > 0 and alone["kernel"] > 0
    reads, attend = LAYER.reads_cache, LAYER.attend
    steps = read_kernel.in_steps(64, 1)
    assert all(v["step_ms"] > v["attend_ms"] > 0 for v in steps.values())
    assert LAYER.reads_cache is reads and LAYER.attend is attend
