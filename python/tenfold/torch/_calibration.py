"""Input statistics of attention layers over calibration batches, for the data-aware
objectives of both conversions (collaborative and rotary)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn


def moment_sums(model: nn.Module, layers: list, calibration: Iterable, append_one: bool = False) -> dict:
    """Per layer of `layers` ((name, module) pairs): (E[x x^T] as a float64 CPU tensor
    (D, D), token count) of the inputs x the module sees on the calibration batches,
    collected with forward pre-hooks, padding excluded when a batch has an
    attention_mask; with `append_one` x is [x; 1] (D + 1), for a bias."""
    sums, counts, token_mask = {}, {}, [None]

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

        return hook

    handles = [m.register_forward_pre_hook(hook_for(n), with_kwargs=True) for n, m in layers]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for batch in calibration:
                # (a batch without a mask must not reuse the previous batch's)
                token_mask[0] = batch.get("attention_mask") if isinstance(batch, Mapping) else None
                if isinstance(batch, Mapping):
                    model(**batch)
                elif isinstance(batch, (tuple, list)):
                    model(*batch)
                else:
                    model(batch)
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
