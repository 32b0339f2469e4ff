"""tenfold.torch: every family converted at full rank reproduces the original model,
GPT-2 generates the same tokens with the cache, bad input is refused with the model
unchanged, and save_pretrained / from_pretrained round-trip a converted model."""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import tenfold.torch as tt  # noqa: E402
from torch_models import (  # noqa: E402
    HEADS, exact_tensors, make_inputs, make_model, qk_weights, run)

FAMILIES = ["bert", "roberta", "distilbert", "albert", "vit", "deit", "gpt2"]


def convert_exact(model, family):
    tensors = {n: exact_tensors(*w) for n, w in qk_weights(model, family).items()}
    return tt.convert(model, tensors)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("family", FAMILIES)
def test_full_rank_matches_original(family, impl):
    model = make_model(family, impl)
    inputs = make_inputs(family)
    before = run(model, inputs)
    convert_exact(model, family)
    layers = [m for m in model.modules() if isinstance(m, tt.CollaborativeAttention)]
    # ALBERT shares one layer across depths: one decomposition.
    assert len(layers) == (1 if family == "albert" else 2)
    if family == "albert":
        group = model.encoder.albert_layer_groups[0].albert_layers[0]
        assert group.attention is layers[0]
    after = run(model, inputs)
    np.testing.assert_allclose(after.numpy(), before.numpy(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("asked_before", [False, True])
@pytest.mark.parametrize("family", ["bert", "distilbert", "albert", "vit", "gpt2"])
def test_output_attentions_are_the_probabilities(family, asked_before):
    # transformers collects them with hooks it puts on the attention class: the
    # converted modules need them too, whether or not the model has installed them.
    model = make_model(family, "eager")
    inputs = make_inputs(family)
    with torch.no_grad():
        want = make_model(family, "eager")(**inputs, output_attentions=True).attentions
        if asked_before:
            model(**inputs, output_attentions=True)
        convert_exact(model, family)
        got = model(**inputs, output_attentions=True).attentions
    assert len(got) == len(want) == (3 if family == "albert" else 2)
    for g, w in zip(got, want):
        assert g.shape == w.shape == (w.shape[0], HEADS, w.shape[2], w.shape[3])
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=0, atol=1e-6)


def test_gpt2_greedy_generation_with_cache_is_identical():
    model = make_model("gpt2")
    prompt = make_inputs("gpt2")["input_ids"][:1, :5]
    opts = dict(max_new_tokens=20, do_sample=False, use_cache=True, pad_token_id=0)
    with torch.no_grad():
        ref = model.generate(prompt, **opts)
    convert_exact(model, "gpt2")
    with torch.no_grad():
        out = model.generate(prompt, **opts, return_dict_in_generate=True)
    assert out.sequences.shape == (1, 25)
    assert torch.equal(out.sequences, ref)
    # The key side of the cache is the shared keys plus the H content logits.
    layer = out.past_key_values.layers[0]
    assert tuple(layer.keys.shape) == (1, 1, 24, 32 + HEADS)
    assert tuple(layer.values.shape) == (1, HEADS, 24, 8)


def test_gpt2_cache_shrinks_below_full_rank():
    model = make_model("gpt2")
    lw = tt.attention_layers(model)
    tensors = {}
    for w in lw:
        full = exact_tensors(w.query_weight.double().numpy(), w.key_weight.double().numpy(),
                             w.query_bias.double().numpy())
        tensors[w.name] = {k: v[..., :12] if k == "collab.mixing" else (v[:12] if "weight" in k and "content" not in k
                                                                          else v) for k, v in full.items()}
    tt.convert(model, tensors)
    with torch.no_grad():
        out = model(make_inputs("gpt2")["input_ids"], use_cache=True)
    assert tuple(out.past_key_values.layers[1].keys.shape) == (2, 1, 7, 12 + HEADS)


def test_unsupported_family_is_refused_naming_it():
    import transformers as tr
    cfg = tr.GPTNeoConfig(vocab_size=99, hidden_size=32, num_layers=1, num_heads=4, attention_types=[[["global"], 1]])
    model = tr.GPTNeoModel(cfg)
    with pytest.raises(ValueError, match="GPTNeoModel.*gpt_neo.*not a supported family"):
        tt.convert(model, {})


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_model_is_unchanged_when_a_layer_fails(family):
    model = make_model(family)
    snapshot = copy.deepcopy(model.state_dict())
    kinds = [type(m) for m in model.modules()]
    tensors = {n: exact_tensors(*w) for n, w in qk_weights(model, family).items()}
    last = sorted(tensors)[-1]
    tensors[last]["collab.key.weight"] = tensors[last]["collab.key.weight"][:, :5]
    with pytest.raises(ValueError, match=last.replace(".", r"\.") + r".*collab\.key\.weight"):
        tt.convert(model, tensors)
    assert [type(m) for m in model.modules()] == kinds
    for k, v in model.state_dict().items():
        assert torch.equal(v, snapshot[k]), k


def test_module_that_differs_from_the_known_one_is_refused():
    model = make_model("distilbert")
    layer = model.transformer.layer[1].attention
    del layer.k_lin
    kinds = [type(m) for m in model.modules()]
    with pytest.raises(ValueError, match=r"transformer\.layer\.1\.attention.*distilbert.*'k_lin'"):
        tt.convert(model, {})
    assert [type(m) for m in model.modules()] == kinds


def test_converting_twice_is_refused():
    model = make_model("bert")
    convert_exact(model, "bert")
    with pytest.raises(ValueError, match="already collaborative"):
        convert_exact(model, "bert")


@pytest.mark.parametrize("family", ["bert", "gpt2", "albert"])
def test_save_pretrained_round_trip(tmp_path, family):
    model = make_model(family)
    convert_exact(model, family)
    inputs = make_inputs(family)
    expected = run(model, inputs)
    model.save_pretrained(tmp_path)
    loaded = tt.from_pretrained(tmp_path)
    assert type(loaded) is type(model)
    assert loaded.config.tenfold_collaborative["shared_dim"] == 32
    np.testing.assert_array_equal(run(loaded, inputs).numpy(), expected.numpy())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precisions_run(dtype):
    model = make_model("bert")
    inputs = make_inputs("bert")
    ref = run(model, inputs)
    convert_exact(model, "bert")
    model.to(dtype)
    out = run(model, inputs)
    assert out.dtype == dtype
    # Half precision: agreement to a few units of its round-off, not float32's.
    eps = torch.finfo(dtype).eps
    assert (out.float() - ref).abs().max().item() < 50 * eps * ref.abs().max().item()


def test_import_tenfold_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, tenfold, tenfold.attention; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
