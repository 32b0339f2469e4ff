"""examples/recover.py: the learning rate follows from the start, and distillation
keeps the best validation checkpoint, so it never leaves a start worse than it found it."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tenfold.attention")

import tenfold.torch as tt  # noqa: E402
from torch_models import make_inputs, make_model  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import recover  # noqa: E402


def test_default_lr_is_lower_for_a_data_aware_start():
    assert recover.default_lr(True) < recover.default_lr(False)


def test_distillation_never_ends_worse_than_its_start():
    original = make_model("bert")
    student = make_model("bert")
    batches = [make_inputs("bert", seed=s) for s in range(3)]
    tt.compress_model(student, shared_dim=16, calibration=batches)
    validation = [make_inputs("bert", seed=9)]
    reference = recover.embed(original, validation)
    start = recover.fidelity(student, reference, validation)["mean_cosine"]
    # A rate far too high for this start: plain distillation ends worse than it began.
    wrecked = recover.copy.deepcopy(student)
    tt.distill(wrecked, original, batches, steps=6, lr=1.0)
    assert recover.fidelity(wrecked, reference, validation)["mean_cosine"] < start - 1e-3
    _, curve, best_step = recover.distill_keeping_best(student, original, batches, validation, steps=6, lr=1.0,
                                                       every=2, log=lambda line: None)
    assert [s for s, _ in curve] == [0, 2, 4, 6]
    end = recover.fidelity(student, reference, validation)["mean_cosine"]
    assert end == pytest.approx(max(c for _, c in curve), abs=1e-6)
    assert end >= start - 1e-6
    assert curve[best_step // 2][1] == pytest.approx(end, abs=1e-6)
