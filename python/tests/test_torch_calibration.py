"""Calibration moments (tenfold.torch._calibration.moment_sums): the same E[x x^T] as the
attention inputs of complete forward passes, although batches after the first stop at the
last attention layer; ALBERT's one shared layer is counted once per use."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tenfold")

from tenfold.torch._calibration import moment_sums  # noqa: E402
from torch_models import make_inputs, make_model, rotary_model  # noqa: E402


def reference(model, layers, batches):
    """E[x x^T] over every call of each layer in complete forward passes, padding excluded."""
    sums, counts, mask = {}, {}, [None]

    def hook_for(name):
        def hook(module, args, kwargs):
            x = (args[0] if args else kwargs["hidden_states"]).double()
            x = x[mask[0].bool()] if mask[0] is not None else x.reshape(-1, x.shape[-1])
            sums[name] = sums.get(name, 0) + x.T @ x
            counts[name] = counts.get(name, 0) + x.shape[0]

        return hook

    handles = [m.register_forward_pre_hook(hook_for(n), with_kwargs=True) for n, m in layers]
    with torch.no_grad():
        for batch in batches:
            mask[0] = batch.get("attention_mask")
            model(**batch)
    for h in handles:
        h.remove()
    return {n: (sums[n] / counts[n], counts[n]) for n, _ in layers}


def token_batches(vocab, count=3):
    out = []
    for s in range(count):
        ids = torch.randint(0, vocab, (2, 7), generator=torch.Generator().manual_seed(s))
        mask = torch.ones_like(ids)
        mask[1, :3] = 0  # left padding
        out.append({"input_ids": ids, "attention_mask": mask})
    return out


@pytest.mark.parametrize("family", ["llama", "albert"])
def test_moments_equal_complete_forward_passes(family):
    if family == "llama":
        model = rotary_model("llama", head_dim=8, key_heads=2)
        layers = [(f"layer{i}", layer.self_attn) for i, layer in enumerate(model.model.layers)]
        data = token_batches(64)
        after = model.model.norm  # runs only when a forward is complete
    else:
        model = make_model("albert")
        layers = [("shared", model.encoder.albert_layer_groups[0].albert_layers[0].attention)]
        data = [make_inputs("albert", seed=s) for s in range(3)]
        after = model.pooler
    finished = []
    handle = after.register_forward_hook(lambda *a: finished.append(1))
    got = moment_sums(model, layers, data)
    handle.remove()
    want = reference(model, layers, data)
    for name, _ in layers:
        assert got[name][1] == want[name][1]
        torch.testing.assert_close(got[name][0], want[name][0], rtol=1e-12, atol=1e-12)
    # the first batch runs whole (it counts each layer's calls), later ones stop at the
    # last call of the last layer
    assert len(finished) == 1
