"""`tenfold attention compress` on rotary checkpoints (Llama, Qwen2, Mistral written by
transformers' save_pretrained): the program's band latents, and with --value-dim or
--kv-cache its latent values, against tenfold.torch's own conversion of the same weights
(weight-only and data-aware), exact at full size, loaded with tenfold.torch.load_compressed
and, saved again, with tenfold.torch.from_pretrained; and the refusals."""

import json
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

import tenfold.torch as tt  # noqa: E402
from torch_models import DIM, ROTARY_CLASSES, rotary_model  # noqa: E402

VOCAB, HEAD_DIM = 64, 16


def save_model(path, family="llama", heads=4, key_heads=2, seed=0, **extra):
    """A two-layer random-weight model (torch_models.rotary_model) saved with save_pretrained."""
    model = rotary_model(family, head_dim=HEAD_DIM, heads=heads, key_heads=key_heads, impl="eager", seed=seed,
                         vocab=VOCAB, **extra)
    model.save_pretrained(path)
    return model


def load(path, family="llama"):
    return ROTARY_CLASSES[family][1].from_pretrained(path, attn_implementation="eager").eval()


def run(cli, *args):
    return subprocess.run([cli, "attention", "compress", *map(str, args)], capture_output=True, text=True)


def converted(cli, tmp_path, model_dir, *args, family="llama"):
    out = tmp_path / "out.safetensors"
    r = run(cli, model_dir / "model.safetensors", "-o", out, "-q", *args)
    assert r.returncode == 0, r.stderr
    return tt.load_compressed(load(model_dir, family), out), r.stdout


def tokens(seed=1, batch=2, n=24):
    return torch.randint(0, VOCAB, (batch, n), generator=torch.Generator().manual_seed(seed))


def relative(a, b):
    return float((a - b).detach().norm() / b.detach().norm())


@pytest.mark.parametrize("family,heads,key_heads", [("llama", 4, 2), ("llama", 4, 1), ("llama", 4, 4),
                                                     ("qwen2", 4, 2), ("mistral", 4, 2)])
@pytest.mark.parametrize("bands", [1, 2])
def test_full_is_exact(cli, tmp_path, family, heads, key_heads, bands):
    extra = {"sliding_window": 8} if family == "mistral" else {}
    original = save_model(tmp_path / "m", family, heads, key_heads, **extra)
    model, stdout = converted(cli, tmp_path, tmp_path / "m", "--shared-dim", "full", "--bands", str(bands),
                              family=family)
    x = tokens()
    with torch.no_grad():
        want, got = original(x).logits, model(x).logits
    assert relative(got, want) < 1e-4
    assert type(model.model.layers[0].self_attn).__name__ == "RotarySharedKeyAttention"
    # Random keys have full rank: the original cache, G d values.
    original = key_heads * HEAD_DIM
    assert f"key cache {original} (full) values per token and layer (of {original}" in stdout


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("data", [False, True])
@pytest.mark.parametrize("bands", [1, 4])
def test_reduced_budget_matches_tenfold_torch(cli, tmp_path, family, data, bands):
    """The program's factors and logits against compress_model on the same weights,
    weight-only and with calibration moments written by write_calibration."""
    original = save_model(tmp_path / "m", family)
    batches = [{"input_ids": tokens(seed=s)} for s in (5, 6)]
    args = ["--shared-dim", 10, "--bands", bands, "--report", tmp_path / "report.json"]
    if data:
        stats = tmp_path / "calib.safetensors"
        count = tt.write_calibration(original, batches, stats, source="random tokens")
        assert count == 2 * 2 * 24
        args += ["--calibration", stats]
    model, _ = converted(cli, tmp_path, tmp_path / "m", *args, family=family)
    reference = load(tmp_path / "m", family)
    rows = tt.compress_model(reference, 10, calibration=batches if data else None, bands=bands)
    report = json.loads((tmp_path / "report.json").read_text())
    for row, layer, mine, theirs in zip(rows, report["layers"], model.model.layers, reference.model.layers):
        a, b = mine.self_attn, theirs.self_attn
        # One solver: the same tensors, up to the float32 rounding of the checkpoint.
        for name, t in b.state_dict().items():
            if name.startswith(("key.", "expand", "mixing", "frequency")):
                assert relative(a.state_dict()[name].double(), t.double()) < 1e-6, name
        assert layer["key_values"] == row["key_values"] == 10
        assert layer["ranks"] == row["ranks"]
        assert layer["decode_flops"] == row["decode_flops"]
        assert layer["relative_error"] == pytest.approx(row["relative_error"], rel=1e-6)
        if data:
            assert layer["data_relative_error"] == pytest.approx(row["data_error"], rel=1e-6)
        if bands > 1:
            assert torch.equal(a.inv_freq, b.inv_freq)
    x = tokens()
    with torch.no_grad():
        got, want, first = model(x).logits, reference(x).logits, original(x).logits
    assert relative(got, want) < 1e-4
    assert relative(got, first) > 1e-3  # the budget does change the model


def random_value_biases(model, path):
    """Qwen2's value biases random (transformers starts them at zero), saved again."""
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.v_proj.bias.normal_()
    model.save_pretrained(path)
    return model


def same_attention(mine, theirs, tolerance=1e-6):
    """Every tensor of two converted attention modules, up to the checkpoint's float32 rounding."""
    want = theirs.state_dict()
    assert sorted(mine.state_dict()) == sorted(want)
    for name, t in want.items():
        got = mine.state_dict()[name]
        if t.is_floating_point():
            assert relative(got.double(), t.double()) < tolerance, name
        else:
            assert torch.equal(got, t), name


def program_and_python(cli, tmp_path, family, data, args, **options):
    """The program's conversion of a saved model with `args` (Qwen2 with random value biases;
    with `data`, calibration moments written by write_calibration) and compress_model(**options)
    of the same weights and batches: (original, program's model, stdout, Python's model, its
    rows, the program's report)."""
    original = save_model(tmp_path / "m", family)
    if family == "qwen2":
        random_value_biases(original, tmp_path / "m")
    batches = [{"input_ids": tokens(seed=s)} for s in (5, 6)]
    args = [*args, "--report", tmp_path / "report.json"]
    if data:
        stats = tmp_path / "calib.safetensors"
        tt.write_calibration(original, batches, stats, source="random tokens")
        args += ["--calibration", stats]
    model, stdout = converted(cli, tmp_path, tmp_path / "m", *args, family=family)
    reference = load(tmp_path / "m", family)
    rows = tt.compress_model(reference, calibration=batches if data else None, **options)
    report = json.loads((tmp_path / "report.json").read_text())
    return original, model, stdout, reference, rows, report


def assert_same_model_round_trip(tmp_path, original, model, reference):
    """The program's model has the Python conversion's metadata and logits (not the
    original's) and saves and loads again with from_pretrained; returns the reloaded model."""
    from safetensors import safe_open

    with safe_open(tmp_path / "out.safetensors", "pt") as f:
        assert json.loads(f.metadata()["tenfold.rotary"]) == reference.config.tenfold_rotary
    x = tokens()
    with torch.no_grad():
        got, want, first = model(x).logits, reference(x).logits, original(x).logits
    assert relative(got, want) < 1e-4
    assert relative(got, first) > 1e-3  # the budget does change the model
    model.save_pretrained(tmp_path / "saved")
    again = tt.from_pretrained(tmp_path / "saved")
    # (the same attention implementation: a cache stored in 8 bits turns the last-bit
    # differences between implementations into different stored numbers in later layers)
    again.config._attn_implementation = model.config._attn_implementation
    with torch.no_grad():
        assert relative(again(x).logits, got) < 1e-6
    return again


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("data", [False, True])
@pytest.mark.parametrize("bands", [1, 4])
def test_kv_cache_matches_tenfold_torch(cli, tmp_path, family, data, bands):
    """--kv-cache 0.5 writes the tensors and metadata compress_model(kv_cache=0.5) makes
    (one split, one solver for keys and values), weight-only and with calibration moments
    written by write_calibration; the program's output loads, saves and loads again with
    from_pretrained, and its logits are the Python conversion's."""
    from safetensors import safe_open

    original, model, stdout, reference, rows, report = program_and_python(
        cli, tmp_path, family, data, ["--kv-cache", 0.5, "--bands", bands], kv_cache=0.5, bands=bands)
    # Half of 2 x 32 values per token and layer: 10 keys (whole complex keys) + 22 values for
    # bands == 1, 11 + 21 else.
    keys, values = (10, 22) if bands == 1 else (11, 21)
    assert "KV cache 50.0 % of the original" in stdout
    assert report["shared_dim"] == keys and report["value_dim"] == values and report["kv_cache"] == 0.5
    for row, layer, mine, theirs in zip(rows, report["layers"], model.model.layers, reference.model.layers):
        same_attention(mine.self_attn, theirs.self_attn)
        assert "v_proj" not in dict(mine.self_attn.named_children())
        assert (layer["key_values"], layer["value_values"]) == (row["key_values"], row["value_values"]) == (keys, values)
        assert layer["relative_error"] == pytest.approx(row["relative_error"], rel=1e-6)
        assert layer["value_relative_error"] == pytest.approx(row["value_error"], rel=1e-6)
        if data:
            assert layer["data_relative_error"] == pytest.approx(row["data_error"], rel=1e-6)
            assert layer["value_data_relative_error"] == pytest.approx(row["value_data_error"], rel=1e-6)
    with safe_open(tmp_path / "out.safetensors", "pt") as f:
        assert len(json.loads(f.metadata()["tenfold.value_relative_errors"])) == 2
    again = assert_same_model_round_trip(tmp_path, original, model, reference)
    assert again.model.layers[0].self_attn.value_values == values


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("data", [False, True])
@pytest.mark.parametrize("emphasis", [None, 2.5])
def test_joint_matches_tenfold_torch(cli, tmp_path, family, data, emphasis):
    """--kv-cache 0.25 --joint writes what compress_model(kv_cache=0.25, joint=True) makes: one
    latent of 16 values per token and layer for keys and values (Qwen2 with random value
    biases; 32 would be exact: the width D), loaded, saved and loaded again; without
    --key-emphasis as key_weighting="none", with it as that number."""
    extra = [] if emphasis is None else ["--key-emphasis", emphasis]
    original, model, stdout, reference, rows, report = program_and_python(
        cli, tmp_path, family, data, ["--kv-cache", 0.25, "--joint", *extra], kv_cache=0.25, joint=True,
        key_weighting="none" if emphasis is None else emphasis)
    assert "joint latent 16 values per token and layer for keys and values (of 64): KV cache 25.0 %" in stdout
    assert report["shared_dim"] == report["value_dim"] == 16 and report["joint"] is True
    for row, layer, mine, theirs in zip(rows, report["layers"], model.model.layers, reference.model.layers):
        same_attention(mine.self_attn, theirs.self_attn)
        assert layer["key_values"] == layer["value_values"] == row["key_values"] == 16
        assert layer["relative_error"] == pytest.approx(row["relative_error"], rel=1e-6)
        assert layer["value_relative_error"] == pytest.approx(row["value_error"], rel=1e-6)
        if data:
            assert layer["data_relative_error"] == pytest.approx(row["data_error"], rel=1e-6)
    assert assert_same_model_round_trip(tmp_path, original, model, reference).model.layers[0].self_attn.joint


@pytest.mark.parametrize("family", ["llama", "qwen2", "mistral"])
def test_joint_full_is_exact(cli, tmp_path, family):
    extra = {"sliding_window": 8} if family == "mistral" else {}
    original = save_model(tmp_path / "m", family, **extra)
    if family == "qwen2":
        random_value_biases(original, tmp_path / "m")
    model, stdout = converted(cli, tmp_path, tmp_path / "m", "--shared-dim", "full", "--joint", family=family)
    x = tokens()
    with torch.no_grad():
        assert relative(model(x).logits, original(x).logits) < 1e-4
    assert "values per token and layer for keys and values (of 64) (full)" in stdout


@pytest.mark.parametrize("family", ["llama", "qwen2", "mistral"])
@pytest.mark.parametrize("bands", [1, 2])
def test_whole_kv_cache_is_exact(cli, tmp_path, family, bands):
    """--kv-cache 1 keeps every key and value (G d each): the original's logits."""
    extra = {"sliding_window": 8} if family == "mistral" else {}
    original = save_model(tmp_path / "m", family, **extra)
    if family == "qwen2":
        random_value_biases(original, tmp_path / "m")
    model, stdout = converted(cli, tmp_path, tmp_path / "m", "--kv-cache", 1, "--bands", bands, family=family)
    x = tokens()
    with torch.no_grad():
        assert relative(model(x).logits, original(x).logits) < 1e-4
    assert model.model.layers[0].self_attn.value_values == 32
    assert "value cache 32 latent values per token and layer (of 32): KV cache 100.0 %" in stdout


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("cache_dtype,fraction,args", [("float8_e4m3fn", 0.25, []),
                                                       ("bfloat16", 0.5, []),
                                                       ("float8_e4m3fn", 0.125, ["--bands", 1]),
                                                       ("bfloat16", 0.25, ["--joint"])])
def test_cache_dtype_matches_tenfold_torch(cli, tmp_path, family, cache_dtype, fraction, args):
    """--cache-dtype: --kv-cache counts the stored bytes, as compress_model(cache_dtype=...):
    at 1/w every key and value whole (k_proj as the key, no solver), below it the conversion
    of w times the fraction; the same metadata and logits (the cache rounded as stored),
    loaded, saved and loaded again with the storage."""
    dtype = getattr(torch, cache_dtype)
    options = dict(kv_cache=fraction, cache_dtype=dtype)
    if args == ["--joint"]:
        options.update(joint=True, key_weighting="none")
    elif args:
        options.update(bands=1)
    original, model, stdout, reference, rows, report = program_and_python(
        cli, tmp_path, family, False, ["--kv-cache", fraction, "--cache-dtype", cache_dtype, *args], **options)
    whole = not args
    assert report["whole"] is whole and report["cache_dtype"] == cache_dtype
    for row, layer, mine, theirs in zip(rows, report["layers"], model.model.layers, reference.model.layers):
        same_attention(mine.self_attn, theirs.self_attn)
        assert mine.self_attn.cache_dtype == dtype and mine.self_attn.whole is whole
        assert layer["key_values"] == row["key_values"]
    if whole:
        assert f"stored in {cache_dtype}: KV cache {100 * fraction:.1f} % of the original's bytes" in stdout
    again = assert_same_model_round_trip(tmp_path, original, model, reference)
    assert all(m.cache_dtype == dtype for m in again.modules() if isinstance(m, tt.RotarySharedKeyAttention))


def test_cache_dtype_refusals(cli, tmp_path):
    """--cache-dtype: a fraction above what the cache holds, options the whole form does not
    use, a bfloat16 cache for a bfloat16 checkpoint; one line, nothing written."""
    save_model(tmp_path / "m")
    bf16 = save_model(tmp_path / "b").to(torch.bfloat16)
    bf16.save_pretrained(tmp_path / "b")
    for model, args, words in (
            ("m", ["--kv-cache", 0.3, "--cache-dtype", "float8_e4m3fn"],
             "--kv-cache 0.3 with a float8_e4m3fn cache: that cache holds at most 1/4 of this model's cache bytes"),
            ("m", ["--kv-cache", 0.5, "--cache-dtype", "bfloat16", "--bands", 2],
             "--bands does not apply to --kv-cache 0.5 with --cache-dtype bfloat16: every key and value is kept whole"),
            ("m", ["--kv-cache", 0.5, "--cache-dtype", "float16"], "--cache-dtype: float16 not in {bfloat16,"),
            ("b", ["--kv-cache", 0.25, "--cache-dtype", "bfloat16", "--bands", 1],
             "--cache-dtype bfloat16 is for float32 models; this model computes in bfloat16")):
        r = run(cli, tmp_path / model / "model.safetensors", "-o", tmp_path / "o.safetensors", *args)
        assert r.returncode != 0
        assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (tmp_path / "o.safetensors").exists()


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_value_dim_full_is_exact(cli, tmp_path, family):
    """--value-dim full (the smallest exact latent) beside the keys: the original's logits."""
    original = save_model(tmp_path / "m", family)
    if family == "qwen2":
        random_value_biases(original, tmp_path / "m")
    model, stdout = converted(cli, tmp_path, tmp_path / "m", "--shared-dim", "full", "--value-dim", "full",
                              "--bands", 2, family=family)
    x = tokens()
    with torch.no_grad():
        assert relative(model(x).logits, original(x).logits) < 1e-4
    assert "value cache 32 latent values per token and layer (of 32) (full)" in stdout


def test_calibration_for_biases_needs_the_augmented_moment(cli, tmp_path):
    """Qwen2's biases: a (D, D) moment is refused naming the (D+1, D+1) one."""
    from safetensors.torch import save_file

    save_model(tmp_path / "m", "qwen2")
    stats = {f"model.layers.{i}.self_attn.input_moment": torch.eye(DIM, dtype=torch.float64) for i in range(2)}
    save_file(stats, tmp_path / "c.safetensors", metadata={"tenfold.calibration.tokens": "10"})
    r = run(cli, tmp_path / "m" / "model.safetensors", "-o", tmp_path / "o.safetensors", "--shared-dim", 8,
            "--bands", 2, "--calibration", tmp_path / "c.safetensors")
    assert r.returncode != 0
    assert f"({DIM + 1}, {DIM + 1})" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.safetensors").exists()


@pytest.mark.parametrize("case,args,words", [
    ("qwen3", ["--shared-dim", "full", "--bands", 2], "q_norm"),
    ("dynamic", ["--shared-dim", "full", "--bands", 2], "sequence length"),
    ("partial", ["--shared-dim", "full", "--bands", 2], "partial_rotary_factor"),
    ("llama", ["--shared-dim", "full"], "--bands"),
    ("llama", ["--shared-dim", "full", "--bands", 3], "divisor"),
    ("llama", ["--shared-dim", 7, "--bands", 1], "two values"),
    ("llama", ["--shared-dim", 33, "--bands", 2], "exceeds the original key cache of 32"),
    ("llama", ["--shared-dim", 0, "--bands", 2], "positive integer or full"),
    ("llama", ["--shared-dim", 8, "--bands", 2, "--init", "random"], "--init does not apply"),
    ("llama", ["--kv-cache", 0, "--bands", 2], "--kv-cache must be a fraction in (0, 1] of the original key and "
                                               "value cache, got 0"),
    ("llama", ["--kv-cache", 1.5, "--bands", 2], "--kv-cache must be a fraction in (0, 1]"),
    ("llama", ["--kv-cache", 0.02, "--bands", 1], "--kv-cache 0.02 keeps 1 of the 64 key and value values per "
                                                  "token and layer: too few"),
    ("llama", ["--kv-cache", 0.5, "--shared-dim", 8, "--bands", 2], "give it without --shared-dim"),
    ("llama", ["--kv-cache", 0.5, "--value-dim", 8, "--bands", 2], "give it without --value-dim"),
    ("llama", ["--bands", 2], "needs --shared-dim (key values per token and layer) or --kv-cache"),
    ("llama", ["--shared-dim", 8, "--value-dim", 33, "--bands", 2], "--value-dim 33 exceeds the original value "
                                                                    "cache of 32"),
    ("llama", ["--shared-dim", 8, "--value-dim", 0, "--bands", 2], "--value-dim must be a positive integer or full"),
    ("llama", ["--shared-dim", 8, "--joint", "--bands", 2], "--bands does not apply to --joint"),
    ("llama", ["--shared-dim", 8, "--joint", "--value-dim", 8], "--value-dim does not apply to --joint"),
    ("llama", ["--shared-dim", 65, "--joint"], "joint latent of 65 values exceeds the original key and value cache "
                                               "of 64"),
    ("llama", ["--kv-cache", 0.5, "--shared-dim", 8, "--joint"], "give it without --shared-dim"),
    ("llama", ["--shared-dim", 8, "--bands", 2, "--key-emphasis", 2], "--key-emphasis applies to --joint"),
    ("llama", ["--shared-dim", 8, "--joint", "--key-emphasis", 0], "--key-emphasis must be finite and > 0"),
])
def test_refusals(cli, tmp_path, case, args, words):
    if case == "qwen3":
        save_model(tmp_path / "m", "qwen3")
    elif case == "dynamic":
        save_model(tmp_path / "m", rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0})
    else:
        save_model(tmp_path / "m")
        if case == "partial":
            config = json.loads((tmp_path / "m" / "config.json").read_text())
            config["partial_rotary_factor"] = 0.5
            (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    r = run(cli, tmp_path / "m" / "model.safetensors", "-o", tmp_path / "o.safetensors", *args)
    assert r.returncode != 0
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "o.safetensors").exists()


def test_rotary_options_refused_for_other_models(cli, tmp_path):
    """--bands and --shared-dim full need a rotary checkpoint; write_calibration a rotary model."""
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=DIM, num_hidden_layers=1, num_attention_heads=4,
                                     intermediate_size=2 * DIM)
    bert = transformers.BertModel(config).eval()
    bert.save_pretrained(tmp_path / "b")
    for args, words in ((["--shared-dim", 8, "--bands", 2], "--bands applies to rotary checkpoints"),
                        (["--shared-dim", "full"], "--shared-dim full applies to rotary checkpoints"),
                        (["--shared-dim", 8, "--kv-cache", 0.5], "--kv-cache applies to rotary checkpoints"),
                        (["--shared-dim", 8, "--value-dim", 8], "--value-dim applies to rotary checkpoints"),
                        (["--shared-dim", 8, "--key-emphasis", 2], "--key-emphasis applies to rotary checkpoints"),
                        ([], "--shared-dim is required")):
        r = run(cli, tmp_path / "b" / "model.safetensors", "-o", tmp_path / "o.safetensors", *args)
        assert r.returncode != 0 and words in r.stderr, r.stderr
    with pytest.raises(ValueError, match="not a rotary model"):
        tt.write_calibration(bert, [torch.zeros(1, 4, dtype=torch.long)], tmp_path / "c.safetensors")
    assert not (tmp_path / "c.safetensors").exists()
