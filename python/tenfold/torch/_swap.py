"""Putting converted attention modules in place of the originals in a transformers model."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager

from torch import nn


def _put(model: nn.Module, old: Mapping, new: Mapping) -> None:
    by_id = {id(old[name]): module for name, module in new.items()}
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if id(child) in by_id:
                setattr(parent, child_name, by_id[id(child)])


def swap(model: nn.Module, old: Mapping, new: Mapping) -> None:
    """Puts every new module where its old one was (shared modules, as ALBERT's, in
    every place); called only once all of them were built."""
    _capture_outputs(model, old, new)
    _put(model, old, new)


@contextmanager
def swapped(model: nn.Module, old: Mapping, new: Mapping):
    """The new modules in place of the old ones while the block runs (to measure a
    candidate), the old ones back after it, also on error."""
    _put(model, old, new)
    try:
        yield model
    finally:
        _put(model, new, old)


def _capture_outputs(model: nn.Module, old: Mapping, new: Mapping) -> None:
    """transformers (5.x) collects ``output_attentions`` with forward hooks that each
    (sub)model installs once, on the modules of the attention class it names, and a
    module of another class gets none: install them now, as the innermost pretrained
    model holding each layer would, and give each new module the ones of the module
    it replaces (they record the probabilities, output 1 of forward)."""
    try:
        from transformers import PreTrainedModel
        from transformers.utils.output_capturing import maybe_install_capturing_hooks
    except ImportError:  # releases without it return the probabilities up the call stack
        return
    owners = [(n, m) for n, m in model.named_modules() if isinstance(m, PreTrainedModel)]
    for name, module in new.items():
        holders = [(len(n), m) for n, m in owners if not n or name.startswith(n + ".")]
        if not holders:
            continue
        maybe_install_capturing_hooks(max(holders, key=lambda h: h[0])[1])
        for hook in old[name]._forward_hooks.values():
            if getattr(hook, "__module__", None) == maybe_install_capturing_hooks.__module__:
                module.register_forward_hook(hook)
