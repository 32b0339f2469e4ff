"""tenfold.torch.distill: the batch forms it takes, and bad batches refused with the
student left as it was."""

import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tenfold.attention")

import tenfold.torch as tt  # noqa: E402
from torch_models import make_inputs, make_model, rotary_model  # noqa: E402


def _pair():
    teacher = make_model("bert")
    student = copy.deepcopy(teacher)
    tt.compress_model(student, shared_dim=12, n_iter_max=5)
    return student, teacher


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _assert_same(model, state):
    for k, v in model.state_dict().items():
        assert torch.equal(v, state[k]), k


def test_dict_batches_train_only_the_collaborative_parameters():
    student, teacher = _pair()
    before = _state(student)
    losses = tt.distill(student, teacher, [make_inputs("bert")], steps=3)
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    after = student.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(".collab." in k for k in changed)


@pytest.mark.parametrize("form", ["tuple", "list", "tensor"])
def test_positional_batches_as_in_calibration(form):
    # (ids,), [ids] and ids run the model positionally, every token real.
    student, teacher = _pair()
    ids = make_inputs("bert")["input_ids"]
    batch = {"tuple": (ids,), "list": [ids], "tensor": ids}[form]
    losses = tt.distill(student, teacher, [batch], steps=2)
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    # The same as a dict batch of the ids alone (no mask: every token real).
    student2, _ = _pair()
    assert tt.distill(student2, teacher, [{"input_ids": ids}], steps=2) == pytest.approx(losses, rel=1e-5)


@pytest.mark.parametrize("batches", [[], (), iter([])], ids=["list", "tuple", "iterator"])
def test_empty_batches_are_refused(batches):
    student, teacher = _pair()
    before = _state(student)
    with pytest.raises(ValueError, match="batches is empty"):
        tt.distill(student, teacher, batches, steps=1)
    _assert_same(student, before)


def test_sequence_without_real_tokens_is_refused_and_the_student_restored():
    student, teacher = _pair()
    good = make_inputs("bert")
    bad = {k: v.clone() for k, v in good.items()}
    bad["attention_mask"][1] = 0  # the second sequence is all padding
    before = _state(student)
    # The bad batch comes second: one step has trained the student when it is drawn.
    with pytest.raises(ValueError, match=r"batch 1: sequence 1 has no real token"):
        tt.distill(student, teacher, [good, bad], steps=4)
    _assert_same(student, before)
    assert all(p.requires_grad for p in student.parameters())
    all_padding = {**good, "attention_mask": torch.zeros_like(good["attention_mask"])}
    with pytest.raises(ValueError, match=r"batch 0: sequence 0 has no real token"):
        tt.distill(student, teacher, [all_padding], steps=1)
    _assert_same(student, before)


def test_steps_and_lr_are_checked_by_their_keywords():
    student, teacher = _pair()
    batches = [make_inputs("bert")]
    assert len(tt.distill(student, teacher, batches, steps=np.int64(2), lr=np.float32(1e-3))) == 2
    before = _state(student)
    with pytest.raises(TypeError, match=r"^steps must be an int, got '3' \(str\)$"):
        tt.distill(student, teacher, batches, steps="3")
    with pytest.raises(TypeError, match=r"^steps must be an int, got 2\.5 \(float\)$"):
        tt.distill(student, teacher, batches, steps=2.5)
    with pytest.raises(TypeError, match=r"^lr must be a number, got '1e-3' \(str\)$"):
        tt.distill(student, teacher, batches, steps=1, lr="1e-3")
    _assert_same(student, before)


def _rotary_pair():
    teacher = rotary_model("llama", head_dim=8, heads=4, key_heads=2, impl="sdpa", seed=2, vocab=50)
    student = copy.deepcopy(teacher)
    tt.compress_model(student, kv_cache=0.5, bands=2)
    ids = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(3))
    return student, teacher, [{"input_ids": ids}]


def _kl(student, teacher, batch):
    with torch.no_grad():
        t = torch.log_softmax(teacher(**batch).logits, -1)
        return float((t.exp() * (t - torch.log_softmax(student(**batch).logits, -1))).sum(-1).mean())


def test_kl_on_a_rotary_decoder_trains_its_keys_and_values_only():
    student, teacher, batches = _rotary_pair()
    before, start = _state(student), _kl(student, teacher, batches[0])
    losses = tt.distill(student, teacher, batches, steps=20, lr=1e-2, loss="kl")
    assert losses[0] == pytest.approx(start, rel=1e-4)  # the loss is the mean KL per token
    assert _kl(student, teacher, batches[0]) < 0.5 * start
    after = student.state_dict()
    changed = {k.split(".self_attn.")[1] for k in before if not torch.equal(before[k], after[k])}
    folded = {m.folded for m in student.modules() if isinstance(m, tt.RotarySharedKeyAttention)}
    assert changed == {"key.weight", "expand", "value.weight", "o_proj.weight" if folded == {True} else "value_expand"}


def test_evaluate_keeps_the_best_parameters_and_cpu_seconds_stops():
    student, teacher, batches = _rotary_pair()
    start = _state(student)
    seen = []
    # An evaluation that only gets worse: the student ends as it started.
    losses = tt.distill(student, teacher, batches, steps=6, lr=1e-2, loss="kl", every=2,
                        evaluate=lambda m: len(seen), on_evaluate=lambda step, v: seen.append((step, v)))
    assert len(losses) == 6 and [s for s, _ in seen] == [0, 2, 4, 6]
    _assert_same(student, start)
    # One that gets better each time: the student ends with the last parameters.
    seen.clear()
    tt.distill(student, teacher, batches, steps=6, lr=1e-2, loss="kl", every=3,
               evaluate=lambda m: -len(seen), on_evaluate=lambda step, v: seen.append((step, v)))
    assert [s for s, _ in seen] == [0, 3, 6]
    assert any(not torch.equal(v, start[k]) for k, v in student.state_dict().items())
    # Stopped by CPU time after the first step, evaluated there.
    seen.clear()
    losses = tt.distill(student, teacher, batches, steps=50, loss="kl", cpu_seconds=0, evaluate=lambda m: 0.0,
                        on_evaluate=lambda step, v: seen.append(step))
    assert len(losses) == 1 and seen == [0, 1]


@pytest.mark.parametrize("options,error,message", [
    (dict(loss="mse"), ValueError, "loss must be 'cosine' or 'kl'"), (dict(every=0), ValueError, "every must be"),
    (dict(cpu_seconds=-1), ValueError, "cpu_seconds"),
])
def test_bad_distill_options_are_refused(options, error, message):
    student, teacher, batches = _rotary_pair()
    before = _state(student)
    with pytest.raises(error, match=message):
        tt.distill(student, teacher, batches, steps=1, **options)
    _assert_same(student, before)
