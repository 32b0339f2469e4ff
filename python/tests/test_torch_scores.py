"""Below full rank: the collaborative module's scores and probabilities equal a direct
NumPy evaluation of s_h(x, y) = x^T W~_Q diag(m_h) W~_K^T y + v_h^T y; gradients reach
every collaborative parameter (checked against central finite differences)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import tenfold.torch as tt  # noqa: E402
from torch_models import HEADS, DIM, make_inputs, make_model, run  # noqa: E402

RANK = 10


def random_tensors(rng, heads=HEADS, dim=DIM, rank=RANK):
    """Random collaborative tensors, rounded to float32 (the models' parameters)."""
    return {k: v.astype(np.float32).astype(np.float64) for k, v in {"collab.mixing": rng.standard_normal((heads, rank)) * 0.3,
            "collab.query.weight": rng.standard_normal((rank, dim)) * 0.3,
            "collab.key.weight": rng.standard_normal((rank, dim)) * 0.3,
            "collab.content_bias.weight": rng.standard_normal((heads, dim)) * 0.3}.items()}


def numpy_scores(t, x, y):
    """s[h, i, j] for one sequence, straight from the formula, in float64."""
    q, k = x @ t["collab.query.weight"].T, y @ t["collab.key.weight"].T  # (n, R)
    s = np.einsum("ir,hr,jr->hij", q, t["collab.mixing"], k)
    return s + (y @ t["collab.content_bias.weight"].T).T[:, None, :]


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_scores_below_full_rank_equal_numpy(family):
    rng = np.random.default_rng(3)
    model = make_model(family, "eager")
    names = [w.name for w in tt.attention_layers(model)]
    tensors = {n: random_tensors(rng) for n in names}
    tt.convert(model, tensors).double()
    layer = model.get_submodule(names[0])
    assert layer.shared_dim == RANK
    x = rng.standard_normal((2, 6, DIM))
    keys = layer.collab.key_states(torch.from_numpy(x))
    assert tuple(keys.shape) == (2, 1, 6, RANK + HEADS)
    scores = layer.collab(torch.from_numpy(x), keys).detach().numpy()
    for b in range(2):
        np.testing.assert_allclose(scores[b], numpy_scores(tensors[names[0]], x[b], x[b]), rtol=1e-12, atol=1e-12)
    # Probabilities through the module's forward with a mask given (it already holds
    # whatever causal part applies): key 5 of the second sequence is padding.
    mask = torch.ones(2, 1, 6, 6, dtype=torch.bool)
    mask[1, :, :, 5] = False
    _, probs = layer(torch.from_numpy(x), attention_mask=mask)
    for b in range(2):
        s = numpy_scores(tensors[names[0]], x[b], x[b])
        s[:, :, ~mask[b, 0, 0].numpy()] = -np.inf
        p = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(probs[b].detach().numpy(), p / p.sum(-1, keepdims=True), rtol=1e-12,
                                   atol=1e-14)


def test_causal_mask_when_the_model_passes_none():
    rng = np.random.default_rng(4)
    model = make_model("gpt2", "sdpa")
    names = [w.name for w in tt.attention_layers(model)]
    tensors = {n: random_tensors(rng) for n in names}
    tt.convert(model, tensors).double()
    layer = model.get_submodule(names[0])
    x = rng.standard_normal((1, 5, DIM))
    _, probs = layer(torch.from_numpy(x), attention_mask=None)
    s = numpy_scores(tensors[names[0]], x[0], x[0])
    s[:, np.triu(np.ones((5, 5), bool), 1)] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(probs[0].detach().numpy(), p / p.sum(-1, keepdims=True), rtol=1e-12, atol=1e-14)


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    model = make_model("bert", "eager")
    names = [w.name for w in tt.attention_layers(model)]
    tt.convert(model, {n: random_tensors(rng) for n in names})
    model.double()
    inputs = make_inputs("bert")
    weight = torch.from_numpy(rng.standard_normal((2, 7, DIM)))

    def loss():
        return (run_grad(model, inputs) * weight).sum()

    model.zero_grad()
    loss().backward()
    layer = model.get_submodule(names[1])
    params = {"mixing": layer.collab.mixing, "query": layer.collab.query.weight,
              "key": layer.collab.key.weight, "content_bias": layer.collab.content_bias.weight}
    h = 1e-6
    for what, p in params.items():
        assert p.grad is not None and p.grad.abs().max() > 0, what
        for index in [(0, 0), (1, 3), (p.shape[0] - 1, p.shape[1] - 1)]:
            with torch.no_grad():
                p[index] += h
                up = loss().item()
                p[index] -= 2 * h
                down = loss().item()
                p[index] += h
            fd = (up - down) / (2 * h)
            # Central differences in float64: truncation O(h^2), round-off O(eps/h).
            assert abs(p.grad[index].item() - fd) <= 1e-6 * max(1.0, abs(fd)), (what, index)


def run_grad(model, inputs):
    return model(**inputs).last_hidden_state
