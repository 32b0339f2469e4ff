"""compress_model through the C++ adapter (tenfold.attention.compress): exact at full
rank for every family, data-aware with calibration statistics collected by hooks, and
load_compressed on the CLI's checkpoint equal to compress_model with the same options."""

import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
attention = pytest.importorskip("tenfold.attention")

import tenfold.torch as tt  # noqa: E402
from torch_models import DIM, HEADS, make_inputs, make_model, run  # noqa: E402

FAMILIES = ["bert", "roberta", "distilbert", "albert", "vit", "deit", "gpt2"]


@pytest.mark.parametrize("family", FAMILIES)
def test_compress_model_full_rank_matches_original(family):
    model = make_model(family)
    inputs = make_inputs(family)
    before = run(model, inputs)
    report = tt.compress_model(model, shared_dim=DIM)
    assert len(report) == (1 if family == "albert" else 2)
    assert all(r["relative_error"] < 1e-6 and r["params_after"] > 0 for r in report)
    np.testing.assert_allclose(run(model, inputs).numpy(), before.numpy(), rtol=0, atol=1e-5)


def test_compress_model_below_full_rank_uses_the_adapter():
    model = make_model("gpt2")
    weights = tt.attention_layers(model)
    report = tt.compress_model(model, shared_dim=12, n_iter_max=30)
    for lw, row in zip(weights, report):
        direct = attention.compress(lw.query_weight.numpy(), lw.key_weight.numpy(), lw.query_bias.numpy(),
                                    heads=HEADS, shared_dim=12, n_iter_max=30)
        layer = model.get_submodule(lw.name)
        assert row["name"] == lw.name and row["relative_error"] == pytest.approx(direct.relative_error, rel=1e-6)
        np.testing.assert_array_equal(layer.collab.mixing.detach().numpy(), direct["collab.mixing"])
        np.testing.assert_array_equal(layer.collab.key.weight.detach().numpy(), direct["collab.key.weight"])


def test_calibration_moments_are_the_layer_inputs():
    model = make_model("bert")
    inputs = make_inputs("bert")
    moments = tt.input_moments(model, [inputs])
    with torch.no_grad():
        x = model.embeddings(input_ids=inputs["input_ids"]).double()
    x = x[inputs["attention_mask"].bool()]
    name = "encoder.layer.0.attention.self"
    np.testing.assert_allclose(moments[name][0], (x.T @ x / x.shape[0]).numpy(), rtol=1e-12, atol=1e-12)
    assert moments[name][1] == int(inputs["attention_mask"].sum())
    report = tt.compress_model(model, shared_dim=8, calibration=[inputs, inputs])
    assert all(r["data_error"] is not None and r["calibration_tokens"] == 2 * moments[name][1] for r in report)


def test_a_batch_without_a_mask_counts_every_token():
    # A tensor batch after a dict batch with padding: none of its tokens is masked.
    model = make_model("bert")
    inputs = make_inputs("bert")
    ids = inputs["input_ids"]
    name = "encoder.layer.0.attention.self"
    masked = tt.input_moments(model, [inputs])[name][1]
    both = tt.input_moments(model, [inputs, ids])[name][1]
    assert masked < ids.numel() and both == masked + ids.numel()


def test_bad_shared_dim_names_the_layer_and_leaves_the_model():
    model = make_model("distilbert")
    kinds = [type(m) for m in model.modules()]
    with pytest.raises(ValueError, match=r"transformer\.layer\.0\.attention \(distilbert\)"):
        tt.compress_model(model, shared_dim=DIM + 1)
    assert [type(m) for m in model.modules()] == kinds


def _cli_checkpoint(cli, tmp_path, model, rank, extra=""):
    model.save_pretrained(tmp_path / "orig")
    out = tmp_path / "collab.safetensors"
    cmd = [cli, "attention", "compress", str(tmp_path / "orig" / "model.safetensors"), "--shared-dim", str(rank),
           "-q", "--out", str(out)] + extra.split()
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("family", ["bert", "gpt2", "vit", "albert"])
def test_load_compressed_equals_compress_model(cli, tmp_path, family):
    model = make_model(family)
    inputs = make_inputs(family)
    path = _cli_checkpoint(cli, tmp_path, model, 12)
    loaded = make_model(family, seed=7)  # other weights: everything comes from the file
    tt.load_compressed(loaded, path)
    tt.compress_model(model, shared_dim=12)
    np.testing.assert_allclose(run(loaded, inputs).numpy(), run(model, inputs).numpy(), rtol=0, atol=1e-6)


def _bert_checkpoint_parts(cli, tmp_path):
    """A BERT checkpoint of the program at R = 12: its path, tensors and metadata, and a
    fresh BERT of another seed to load it into."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = _cli_checkpoint(cli, tmp_path, make_model("bert"), 12)
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    return path, load_file(path), meta, make_model("bert", seed=3)


def test_load_compressed_refuses_mismatches_naming_the_tensor(cli, tmp_path):
    from safetensors.torch import save_file

    path, tensors, meta, other = _bert_checkpoint_parts(cli, tmp_path)
    bad = dict(tensors)
    name = "encoder.layer.1.attention.self.collab.key.weight"
    bad[name] = bad[name][:, :-1].contiguous()
    save_file(bad, tmp_path / "bad.safetensors", metadata=meta)
    kinds = [type(m) for m in other.modules()]
    with pytest.raises(ValueError, match=r"encoder\.layer\.1\.attention\.self.*collab\.key\.weight"):
        tt.load_compressed(other, tmp_path / "bad.safetensors")
    save_file(tensors, tmp_path / "meta.safetensors", metadata={**meta, "tenfold.heads": "2"})
    with pytest.raises(ValueError, match="tenfold.heads = 2 disagrees"):
        tt.load_compressed(other, tmp_path / "meta.safetensors")
    bad = dict(tensors)
    bad["embeddings.word_embeddings.weight"] = bad["embeddings.word_embeddings.weight"][:5].contiguous()
    save_file(bad, tmp_path / "emb.safetensors", metadata=meta)
    with pytest.raises(ValueError, match=r"'embeddings\.word_embeddings\.weight' has shape \(5, 32\)"):
        tt.load_compressed(other, tmp_path / "emb.safetensors")
    assert [type(m) for m in other.modules()] == kinds


@pytest.mark.parametrize("scaling", [{"scale_attn_weights": False}, {"scale_attn_by_inverse_layer_idx": True}])
def test_cli_folds_the_gpt2_config_scaling(cli, tmp_path, scaling):
    # The program reads the scaling from config.json: exact at full rank.
    model = make_model("gpt2", **scaling)
    inputs = make_inputs("gpt2")
    before = run(model, inputs)
    path = _cli_checkpoint(cli, tmp_path, model, DIM)
    loaded = make_model("gpt2", seed=7, **scaling)
    tt.load_compressed(loaded, path)
    np.testing.assert_allclose(run(loaded, inputs).numpy(), before.numpy(), rtol=0, atol=1e-5)


def test_module_head_count_wins_over_the_config(cli, tmp_path):
    # A config edited after the model was built: the modules split into 4 heads.
    model = make_model("bert")
    inputs = make_inputs("bert")
    before = run(model, inputs)
    path = _cli_checkpoint(cli, tmp_path, model, DIM)
    model.config.num_attention_heads = 8
    tt.compress_model(model, shared_dim=DIM)
    np.testing.assert_allclose(run(model, inputs).numpy(), before.numpy(), rtol=0, atol=1e-5)
    loaded = make_model("bert", seed=7)
    loaded.config.num_attention_heads = 8
    tt.load_compressed(loaded, path)
    np.testing.assert_allclose(run(loaded, inputs).numpy(), before.numpy(), rtol=0, atol=1e-5)


def test_load_compressed_refuses_non_finite_tensors_and_bad_metadata(cli, tmp_path):
    from safetensors.torch import save_file

    path, tensors, meta, other = _bert_checkpoint_parts(cli, tmp_path)
    kinds = [type(m) for m in other.modules()]
    key = "encoder.layer.1.attention.self.collab.key.weight"
    mixing = "encoder.layer.0.attention.self.collab.mixing"
    for name, index, value, kind in ((key, (1, 2), float("nan"), "NaN"), (mixing, (3, 0), float("-inf"), "Inf")):
        bad = {k: v.clone() for k, v in tensors.items()}
        bad[name][index] = value
        save_file(bad, tmp_path / "bad.safetensors", metadata=meta)
        with pytest.raises(ValueError, match=rf"bad\.safetensors': tensor '{name}' has a non-finite entry "
                                             rf"\({kind}\) at index \[{index[0]}, {index[1]}\]"):
            tt.load_compressed(other, tmp_path / "bad.safetensors")
    for value in ("abc", "0", "-3", " 12"):
        save_file(tensors, tmp_path / "meta.safetensors", metadata={**meta, "tenfold.shared_dim": value})
        with pytest.raises(ValueError, match=rf"meta\.safetensors': metadata tenfold\.shared_dim = '{value}' "
                                             "is not a positive integer"):
            tt.load_compressed(other, tmp_path / "meta.safetensors")
    assert [type(m) for m in other.modules()] == kinds
