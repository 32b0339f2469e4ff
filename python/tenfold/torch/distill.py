"""Recovery after compression: distil a compressed model towards the original on
unlabeled inputs (docs/torch.md, "Fine-tuning and recovery")."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping

import torch
from torch import nn

from .. import _validate
from ._attention import CollaborativeAttention
from .rotary_attention import RotarySharedKeyAttention


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of the token states over the real (unpadded) tokens: (B, n, D) -> (B, D)."""
    if attention_mask is None:
        return hidden.mean(dim=1)
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)


def collaborative_parameters(model: nn.Module) -> list:
    """The parameters the conversion made, each once: every collaborative module's
    ``collab`` (mixing, shared projections, content bias) and every rotary module's
    shared keys (``key`` with its ``mixing`` or ``expand``) and, with latent values,
    ``value`` (none for the joint latent: ``key`` makes it), and the folded ``o_proj`` or
    ``value_expand`` (the original o_proj stays as it was)."""
    seen, out = set(), []
    for m in model.modules():
        if isinstance(m, CollaborativeAttention):
            parts = [m.collab]
        elif isinstance(m, RotarySharedKeyAttention):
            parts = [m.key, m.mixing if m.bands == 1 else m.expand]
            if m.value_values is not None:
                parts += ([] if m.joint else [m.value]) + [m.o_proj if m.folded else m.value_expand]
        else:
            continue
        for part in parts:
            for p in [part] if isinstance(part, nn.Parameter) else part.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
    return out


def _call(model, batch):
    """The model on one batch, as compress_model's calibration runs it: a dict is
    keyword inputs, a tuple or list positional ones, anything else the one input."""
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def _hidden(model, batch):
    return _call(model, batch).last_hidden_state


def _cosine_loss(out, target, mask):
    """Mean over real tokens of 1 - cos(student, teacher state), plus the mean over
    sequences of 1 - cos of the mean-pooled states."""
    cos_tok = nn.functional.cosine_similarity(out, target, dim=-1)
    real = mask.to(out.dtype) if mask is not None else torch.ones_like(cos_tok)
    token_loss = ((1 - cos_tok) * real).sum() / real.sum()
    pooled = nn.functional.cosine_similarity(mean_pool(out, mask), mean_pool(target, mask), dim=-1)
    return token_loss + (1 - pooled).mean()


def _kl_loss(out, target, mask):
    """Mean over real tokens of KL(teacher || student) of the next-token distributions
    (out, target: logits (B, n, V))."""
    t = torch.log_softmax(target.float(), dim=-1)
    kl = (t.exp() * (t - torch.log_softmax(out.float(), dim=-1))).sum(-1)
    real = mask.to(kl.dtype) if mask is not None else torch.ones_like(kl)
    return (kl * real).sum() / real.sum()


def _batches(batches: Iterable):
    """(batch, attention mask or None) of every batch, cycling; each batch is checked
    when first drawn, and an empty `batches` is refused before any step."""
    seen = []
    for k, batch in enumerate(batches):
        mask = batch.get("attention_mask") if isinstance(batch, Mapping) else None
        if mask is not None:
            # A sequence without a real token has no states to match (0/0 in the loss).
            empty = ~torch.atleast_2d(torch.as_tensor(mask)).to(torch.bool).flatten(0, -2).any(dim=-1)
            if empty.any():
                raise ValueError(f"batch {k}: sequence {int(empty.nonzero()[0])} has no real token "
                                 "(its attention_mask is all 0); leave it out")
        seen.append((batch, mask))
        yield seen[-1]
    if not seen:
        raise ValueError("batches is empty: distill needs at least one batch of inputs")
    yield from itertools.cycle(seen)


def distill(
    student: nn.Module,
    teacher: nn.Module,
    batches: Iterable,
    *,
    steps: int = 300,
    lr: float = 1e-3,
    parameters: Iterable | None = None,
    hidden: Callable = _hidden,
    loss: str = "cosine",
    evaluate: Callable | None = None,
    every: int = 50,
    cpu_seconds: float | None = None,
    on_step: Callable | None = None,
    on_evaluate: Callable | None = None,
) -> list:
    """Trains `student` (a converted model) to reproduce `teacher` (the original) on
    unlabeled batches (as compress_model's calibration: dicts of model inputs, whose
    ``attention_mask`` marks the real tokens, tuples, or tensors), cycling through them
    for `steps` Adam steps. `loss`: "cosine" (the mean over real tokens of
    1 - cos(student state, teacher state) plus the mean over sequences of 1 - cos of the
    mean-pooled states; `hidden(model, batch)` gives the (B, n, D) states to match) or
    "kl" (for language models: the mean over real tokens of KL(teacher || student) of
    the next-token distributions, from the outputs' ``logits``). `parameters` defaults to
    the ones the conversion made (collaborative_parameters); everything else stays frozen.

    `evaluate(student)` (a number, lower is better, e.g. held-out perplexity), when
    given, runs before the first step, every `every` steps and after the last; the
    student ends with the parameters of its best evaluation, so never worse than it
    started by that measure. `cpu_seconds` stops after the step that reaches that much
    CPU time of this process. `on_step(step, loss, seconds)` after each step,
    `on_evaluate(steps done, evaluation)` after each evaluation. Returns the losses. An
    empty `batches`, or a sequence whose mask has no real token, is a ValueError; on any
    error the trained parameters are restored to their values before the call."""
    params = list(parameters) if parameters is not None else collaborative_parameters(student)
    if not params:
        raise ValueError("no parameters to train: is the student converted (tenfold.torch.compress_model)?")
    steps, lr = _validate.integer(steps, "steps"), _validate.nonnegative(lr, "lr")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    every = _validate.integer(every, "every")
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    if loss not in ("cosine", "kl"):
        raise ValueError(f"loss must be 'cosine' or 'kl', got {loss!r}")
    if cpu_seconds is not None:
        cpu_seconds = _validate.nonnegative(cpu_seconds, "cpu_seconds")
    output = hidden if loss == "cosine" else (lambda model, batch: _call(model, batch).logits)
    objective = _cosine_loss if loss == "cosine" else _kl_loss
    trainable = {id(p) for p in params}
    frozen = [p for p in student.parameters() if id(p) not in trainable and p.requires_grad]
    before = [p.detach().clone() for p in params]
    for p in frozen:
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    teacher.eval()
    was_training = student.training
    student.eval()  # no dropout: the target is the teacher's deterministic output
    opt = torch.optim.Adam(params, lr=lr)
    losses = []
    start, cpu_start = time.perf_counter(), time.process_time()

    def judge(done):
        with torch.no_grad():
            score = float(evaluate(student))
        if on_evaluate is not None:
            on_evaluate(done, score)
        return score

    try:
        best = (judge(0), [p.detach().clone() for p in params]) if evaluate is not None else None
        for step, (batch, mask) in zip(range(steps), _batches(batches)):
            with torch.no_grad():
                target = output(teacher, batch)
            value = objective(output(student, batch), target, mask)
            opt.zero_grad()
            value.backward()
            opt.step()
            losses.append(value.item())
            last = step + 1 == steps or (cpu_seconds is not None and time.process_time() - cpu_start >= cpu_seconds)
            if on_step is not None:
                on_step(step, losses[-1], time.perf_counter() - start)
            score = judge(step + 1) if best is not None and (last or (step + 1) % every == 0) else None
            if score is not None and score < best[0]:
                best = (score, [p.detach().clone() for p in params])
            if last:
                break
        if best is not None:
            with torch.no_grad():
                for p, b in zip(params, best[1]):
                    p.copy_(b)
    except Exception:
        with torch.no_grad():
            for p, b in zip(params, before):
                p.copy_(b)
        raise
    finally:
        for p in frozen:
            p.requires_grad_(True)
        student.train(was_training)
    return losses
