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
from torch_models import make_inputs, make_model  # noqa: E402


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
