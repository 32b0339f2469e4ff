"""tenfold.attention: compress on NumPy (out, in) weights against the math of
docs/attention.md, and compress_file / analyze_file against compress on the same layers."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from tenfold import attention

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "real_model"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
import bertnp  # noqa: E402
from test_full_rank_forward import HEADS, HEAD_DIM, LAYERS, tiny_bert  # noqa: E402

H, d, D = 4, 8, 24


def layer(rng, dtype=np.float64):
    wq = rng.standard_normal((H * d, D)) / math.sqrt(D)
    wk = rng.standard_normal((H * d, D)) / math.sqrt(D)
    bq = rng.standard_normal(H * d)
    return wq.astype(dtype), wk.astype(dtype), bq.astype(dtype)


def qk(wq, wk):
    """T[h] = W_Q^h W_K^h^T / sqrt(d), with W^h = rows of head h, transposed (D x d)."""
    return np.stack([wq[h * d:(h + 1) * d].T @ wk[h * d:(h + 1) * d] / math.sqrt(d)
                     for h in range(H)])


def collab_qk(r):
    q, k, m = r["collab.query.weight"], r["collab.key.weight"], r["collab.mixing"]
    return np.einsum("rd,hr,re->hde", q, m, k)


def test_names_shapes_and_error_of_a_compressed_layer():
    wq, wk, bq = layer(np.random.default_rng(0))
    r = attention.compress(wq, wk, bq, heads=H, shared_dim=12, n_iter_max=200)
    assert {k: v.shape for k, v in r.items()} == {
        "collab.mixing": (H, 12), "collab.query.weight": (12, D),
        "collab.key.weight": (12, D), "collab.content_bias.weight": (H, D)}
    t = qk(wq, wk)
    err = np.linalg.norm(collab_qk(r) - t) / np.linalg.norm(t)
    assert err == pytest.approx(r.relative_error, abs=1e-12) and 0 < err < 1
    content = np.stack([wk[h * d:(h + 1) * d].T @ bq[h * d:(h + 1) * d] / math.sqrt(d)
                        for h in range(H)])
    np.testing.assert_allclose(r["collab.content_bias.weight"], content, rtol=1e-13, atol=1e-15)
    assert r.data_error is None and r.iterations >= 1 and r.seconds > 0
    assert r.params_before == 2 * D * H * d + H * d
    assert r.params_after == H * 12 + 2 * D * 12 + H * D
    with pytest.raises(TypeError):
        r["collab.mixing"] = None
    with pytest.raises(ValueError):
        r["collab.mixing"][0, 0] = 1.0


def test_full_rank_is_exact_in_float32_too():
    wq, wk, _ = layer(np.random.default_rng(1), np.float32)
    r = attention.compress(wq, wk, heads=H, shared_dim=H * d)
    assert r.iterations == 0 and r["collab.query.weight"].dtype == np.float32
    np.testing.assert_array_equal(r["collab.query.weight"], wq)
    np.testing.assert_array_equal(r["collab.content_bias.weight"], np.zeros((H, D), np.float32))


def test_data_aware_objective_and_its_error():
    rng = np.random.default_rng(2)
    wq, wk, _ = layer(rng)
    tokens = rng.standard_normal((500, D)) * np.linspace(0.2, 3, D)
    s = tokens.T @ tokens / len(tokens)
    r = attention.compress(wq, wk, heads=H, shared_dim=10, input_moment=s, damping=0.0,
                           n_iter_max=200)
    # E[(x^T A y)^2] = tr(S A S A^T) for independent x, y with second moment S.
    delta, t = collab_qk(r) - qk(wq, wk), qk(wq, wk)
    num = sum(np.trace(s @ a @ s @ a.T) for a in delta)
    den = sum(np.trace(s @ a @ s @ a.T) for a in t)
    assert r.data_error == pytest.approx(math.sqrt(num / den), rel=1e-9)
    plain = attention.compress(wq, wk, heads=H, shared_dim=10, n_iter_max=200)
    assert r.data_error < plain.relative_error or r.relative_error > plain.relative_error
    cross = attention.compress(wq, wk, heads=H, shared_dim=10, input_moment=s,
                               key_input_moment=np.eye(D), n_iter_max=50)
    assert cross.data_error is not None


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(heads=5, shared_dim=4), ValueError, "heads"),
        (dict(heads=H, shared_dim=0), ValueError, "shared"),
        (dict(heads=H, shared_dim=H * d + 1), ValueError, "shared"),
        (dict(heads=H, shared_dim=4, init="svd"), ValueError, "svd"),
        (dict(heads=H, shared_dim=4, key_input_moment=np.eye(D)), ValueError, "input_moment"),
        (dict(heads=H, shared_dim=4, input_moment=-np.eye(D)), ValueError, "moment"),
        (dict(heads=H, shared_dim=4, input_moment=np.eye(D + 1)), ValueError, "moment"),
        (dict(heads=H, shared_dim=4, backend="gpu"), ValueError, "gpu"),
    ],
)
def test_documented_errors(kwargs, error, message):
    wq, wk, _ = layer(np.random.default_rng(3))
    with pytest.raises(error, match=message):
        attention.compress(wq, wk, **kwargs)


def test_mismatched_weights_are_refused():
    wq, wk, bq = layer(np.random.default_rng(4))
    with pytest.raises(ValueError):
        attention.compress(wq, wk[:, :-1], heads=H, shared_dim=4)
    with pytest.raises(ValueError):
        attention.compress(wq, wk, bq[:-1], heads=H, shared_dim=4)
    wk[0, 0] = np.inf
    with pytest.raises(ValueError, match="finite|Inf"):
        attention.compress(wq, wk, heads=H, shared_dim=4)


def test_checkpoint_functions_match_compress_on_each_layer(tmp_path):
    tensors = tiny_bert(np.random.default_rng(5))
    model, out = tmp_path / "tiny.safetensors", tmp_path / "collab.safetensors"
    bertnp.write_safetensors(model, tensors)
    rep = attention.compress_file(model, out, shared_dim=5, heads=HEADS, n_iter_max=50)
    assert (rep.heads, rep.head_dim, rep.shared_dim) == (HEADS, HEAD_DIM, 5)
    assert len(rep.layers) == LAYERS and rep.params_after < rep.params_before
    written, _ = bertnp.read_safetensors(out)
    for i in range(LAYERS):
        p = bertnp.attention_prefix(i)
        r = attention.compress(tensors[p + "query.weight"], tensors[p + "key.weight"],
                               tensors[p + "query.bias"], heads=HEADS, shared_dim=5,
                               n_iter_max=50)
        for name, array in r.items():
            np.testing.assert_array_equal(written[p + name], array)
        assert rep.layers[i].relative_error == r.relative_error
    curves = attention.analyze_file(model, heads=HEADS)
    assert len(curves) == LAYERS
    c = curves[0].products
    assert len(c.energy) == tiny_bert.__globals__["WIDTH"] and 1 <= c.dim90 <= c.dim99
    with pytest.raises(OSError):
        attention.compress_file(tmp_path / "missing.safetensors", out, shared_dim=5, heads=2)
    with pytest.raises(OSError):
        attention.analyze_file(tmp_path / "missing.safetensors")


def _value_layer(rng, heads=4, groups=2, d=8, dim=20, out=24):
    return (rng.standard_normal((groups * d, dim)) / np.sqrt(dim),
            rng.standard_normal((out, heads * d)) / np.sqrt(heads * d),
            rng.standard_normal(groups * d))


def _layer_output(vw, ow, vb, xs, a, heads, groups):
    """y = sum_h W_O^h sum_n a_{h,n} v_{g(h)}(x_n), straight from the definition."""
    d = vw.shape[0] // groups
    v = xs @ vw.T + vb  # (n, G d)
    return sum(ow[:, h * d:(h + 1) * d] @ (a[h] @ v[:, (h // (heads // groups)) * d:][:, :d])
               for h in range(heads))


def test_value_latent_is_exact_at_full_size_and_folds_into_o_proj():
    rng = np.random.default_rng(0)
    vw, ow, vb = _value_layer(rng)
    r = attention.value_latent(vw, ow, vb, heads=4, key_heads=2)
    k = r["latent"].shape[0]
    assert k == 16 and r["output"].shape == (24, 4 * k) and r["relative_error"] < 1e-10
    xs, a = rng.standard_normal((5, 20)), rng.standard_normal((4, 5))
    c = np.hstack([xs, np.ones((5, 1))]) @ r["latent"].T  # the cached latent, (n, C_v)
    y = sum(r["output"][:, h * k:(h + 1) * k] @ (a[h] @ c) for h in range(4))
    want = _layer_output(vw, ow, vb, xs, a, 4, 2)
    assert np.linalg.norm(y - want) < 1e-10 * np.linalg.norm(want)


def test_value_latent_error_is_the_dropped_share_of_the_weighted_svd():
    # Independently: X = W_V^T blockdiag(F_g), F_g F_g^T = sum_{h in g} W_O^h^T W_O^h.
    rng = np.random.default_rng(1)
    vw, ow, _ = _value_layer(rng)
    blocks = []
    for g in range(2):
        m = sum(ow[:, h * 8:(h + 1) * 8].T @ ow[:, h * 8:(h + 1) * 8] for h in (2 * g, 2 * g + 1))
        lam, vec = np.linalg.eigh(m)
        blocks.append(vec * np.sqrt(np.clip(lam, 0, None)))
    f = np.zeros((16, 16))
    f[:8, :8], f[8:, 8:] = blocks
    sigma = np.linalg.svd(vw.T @ f, compute_uv=False)
    for k in (2, 5, 9):
        r = attention.value_latent(vw, ow, heads=4, key_heads=2, values=k)
        want = np.sqrt((sigma[k:] ** 2).sum() / (sigma ** 2).sum())
        assert abs(r["relative_error"] - want) < 1e-12 and r["data_error"] is None
        assert r["latent"].shape == (k, 20)


def test_value_latent_refuses_bad_arguments():
    rng = np.random.default_rng(2)
    vw, ow, vb = _value_layer(rng)
    with pytest.raises(ValueError, match="values"):
        attention.value_latent(vw, ow, heads=4, key_heads=2, values=17)
    with pytest.raises(ValueError, match="key_heads"):
        attention.value_latent(vw, ow, heads=4, key_heads=3)
    with pytest.raises(ValueError, match="output_weight"):
        attention.value_latent(vw, ow[:, :-1], heads=4, key_heads=2)
    with pytest.raises(ValueError, match="moment"):
        attention.value_latent(vw, ow, vb, heads=4, key_heads=2, moment=np.eye(20))
