"""Input statistics of attention layers over calibration batches, for the data-aware
objectives of both conversions (collaborative and rotary)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn


#: Batch keys that a transformers base model takes as its task model does.
BASE_INPUTS = frozenset({"input_ids", "attention_mask", "position_ids", "token_type_ids", "inputs_embeds"})


class _Seen(Exception):
    """Every hooked layer has seen this batch: the rest of the forward is not needed."""


def _no_cache(runner: nn.Module, batch: Mapping) -> dict:
    """use_cache=False for a model that would otherwise fill a KV cache it never reads."""
    import inspect

    if "use_cache" in batch or "use_cache" not in inspect.signature(runner.forward).parameters:
        return {}
    return {"use_cache": False}


def moment_sums(model: nn.Module, layers: list, calibration: Iterable, append_one: bool = False) -> dict:
    """Per layer of `layers` ((name, module) pairs): (E[x x^T] as a float64 CPU tensor
    (D, D), token count) of the inputs x the module sees on the calibration batches,
    collected with forward pre-hooks, padding excluded when a batch has an
    attention_mask; with `append_one` x is [x; 1] (D + 1), for a bias. After the first
    batch, a batch's forward stops once every layer has seen its input as often as in the
    first (a module shared by several layers, as ALBERT's, is called once per layer), so
    the layers after the last one, and the model's cache, are not computed."""
    sums, counts, token_mask = {}, {}, [None]
    calls, pending = {}, {}  # per layer: calls in the first batch; calls still to come

    def hook_for(name):
        def hook(module, args, kwargs):
            x = (args[0] if args else kwargs["hidden_states"]).detach().to(torch.float64)
            m = token_mask[0]
            if m is not None and m.shape == x.shape[:2]:
                x = x[m.to(torch.bool)]
            x = x.reshape(-1, x.shape[-1])
            if append_one:
                x = torch.cat((x, torch.ones_like(x[:, :1])), dim=1)
            sums[name] = sums.get(name, 0) + x.T @ x
            counts[name] = counts.get(name, 0) + x.shape[0]
            if pending:
                pending[name] -= 1
                if not any(pending.values()):
                    raise _Seen
            else:
                calls[name] = calls.get(name, 0) + 1

        return hook

    handles = [m.register_forward_pre_hook(hook_for(n), with_kwargs=True) for n, m in layers]
    was_training = model.training
    model.eval()
    # The base model holds every layer: a task head (a language model's logits) is not
    # needed, unless the batch names inputs beyond the base model's own.
    base = getattr(model, "base_model", None)
    base = base if isinstance(base, nn.Module) else model
    try:
        with torch.no_grad():
            for batch in calibration:
                # (a batch without a mask must not reuse the previous batch's)
                token_mask[0] = batch.get("attention_mask") if isinstance(batch, Mapping) else None
                runner = base if not isinstance(batch, Mapping) or set(batch) <= BASE_INPUTS else model
                pending.update(calls)
                try:
                    if isinstance(batch, Mapping):
                        runner(**batch, **_no_cache(runner, batch))
                    elif isinstance(batch, (tuple, list)):
                        runner(*batch)
                    else:
                        runner(batch)
                except _Seen:
                    pass
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    out = {}
    for name, _ in layers:
        if not counts.get(name):
            raise ValueError(f"{name}: the calibration batches reached no token of this layer")
        out[name] = (sums[name].cpu() / counts[name], counts[name])
    return out


def _logits(model: nn.Module, batch) -> torch.Tensor:
    """The model's logits on a batch (a task head's too: a classifier's class scores)."""
    if isinstance(batch, Mapping):
        out = model(**batch, **_no_cache(model, batch))
    else:
        out = model(*batch) if isinstance(batch, (tuple, list)) else model(batch)
    return out.logits if hasattr(out, "logits") else out[0]  # return_dict=False: a tuple


def _prefix(value, rows: int, length: int, row: int, take: int):
    """Of a batch tensor: its first `take` positions when its second axis is the sequence,
    and row `row` when its first axis is the batch's rows; anything else as it is."""
    if not isinstance(value, torch.Tensor) or value.dim() == 0:
        return value
    if value.dim() >= 2 and value.shape[1] == length:
        value = value[:, :take]
    return value[row : row + 1] if value.shape[0] == rows else value


def leading_prefixes(calibration: list, tokens: int, piece: int = 512) -> list:
    """The first rows of the calibration batches, each cut to its first `piece` tokens (a
    causal model's prefix sees what it saw in the batch), until they hold `tokens` tokens."""
    out, seen = [], 0
    for batch in calibration:
        parts = batch if isinstance(batch, Mapping) else {"": batch} if isinstance(batch, torch.Tensor) else None
        ids = None if parts is None else parts.get("input_ids", parts.get("inputs_embeds", parts.get("")))
        if not isinstance(ids, torch.Tensor) or ids.dim() < 2:  # positional tuples and the like: whole
            out.append(batch)
            seen += piece
        else:
            rows, length = ids.shape[0], ids.shape[1]
            for row in range(rows):
                if seen >= tokens:
                    break
                cut = {k: _prefix(v, rows, length, row, min(piece, length)) for k, v in parts.items()}
                out.append(cut if isinstance(batch, Mapping) else cut[""])
                seen += min(piece, length)
        if seen >= tokens:
            break
    return out


def log_probs(model: nn.Module, batch) -> torch.Tensor:
    """The model's log-probabilities on a batch (of the next token per position, padding
    zeroed; of a task head's classes)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            lp = torch.log_softmax(_logits(model, batch).float(), dim=-1)
    finally:
        model.train(was_training)
    mask = batch.get("attention_mask") if isinstance(batch, Mapping) else None
    if mask is None or lp.shape[:-1] != mask.shape:  # no mask, or one score per sequence
        return lp
    return lp * mask[..., None].to(lp.dtype)


def divergence(model: nn.Module, batch, reference: torch.Tensor) -> float:
    """KL(reference || model) summed over the batch's tokens, in double: how far the model's
    next-token distributions moved from the reference's (log_probs of the original)."""
    return float((reference.exp() * (reference - log_probs(model, batch))).sum(dtype=torch.float64))
