"""A dynamic cache layer that appends a decoded token in place (docs/kv-cache.md).

transformers' DynamicLayer concatenates the whole cache with each new token: a decode
step at n cached tokens copies n tokens of keys and values, which at a few thousand tokens
costs more than the attention that reads them. The layers that tenfold.torch's rotary
conversion caches in (shared keys, latent values) are DynamicLayers whose tensors are
views of buffers with room to spare; a step writes its token into the room."""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer

#: The smallest number of tokens a buffer grows by.
MIN_ROOM = 64


class RoomyLayer(DynamicLayer):
    """A DynamicLayer whose keys and values, (B, K, n, w), are the first n tokens of
    buffers of (B, K, capacity, w). Prefill allocates exactly its tokens (the cache bytes
    after prefill are the tensors'); a buffer that is full grows by an eighth of its tokens
    (at least MIN_ROOM), so the spare room stays under an eighth and the copies of a long
    decode are O(1) per token. Whatever replaces the tensors (beam search reordering, batch
    selection, offloading) is taken over with room at the next update; cropping keeps the
    view and the following tokens are written after it. Tensors that need gradients are
    concatenated as DynamicLayer does (writing into a buffer would overwrite what backward
    reads)."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        held = self.keys is not None and self.keys.requires_grad
        if torch.is_grad_enabled() and (key_states.requires_grad or value_states.requires_grad or held):
            return super().update(key_states, value_states, *args, **kwargs)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys, self._key_room = append(self.keys, getattr(self, "_key_room", None), key_states)
        self.values, self._value_room = append(self.values, getattr(self, "_value_room", None), value_states)
        return self.keys, self.values

    def reset(self) -> None:
        self._key_room = self._value_room = None
        super().reset()


def _held_in(held: torch.Tensor, room: torch.Tensor | None) -> bool:
    """Whether `held` is the first tokens of `room`, as append left it (or cropped it), and
    room can be written here (a buffer made under inference_mode only inside it)."""
    return (room is not None and (not room.is_inference() or torch.is_inference_mode_enabled()) and held.dim() == room.dim() and held.data_ptr() == room.data_ptr()
            and held.shape[:-2] == room.shape[:-2] and held.shape[-1] == room.shape[-1]
            and held.stride() == room.stride() and held.dtype == room.dtype and held.device == room.device)


def append(held: torch.Tensor, room: torch.Tensor | None, new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(held with `new` appended on the token axis, the buffer it is a view of): held
    (..., n, w), an empty tensor before the first tokens; new (..., m, w)."""
    n = held.shape[-2] if held.dim() == new.dim() else 0
    m = new.shape[-2]
    if not (_held_in(held, room) and n + m <= room.shape[-2]):
        # capacity: exact at prefill, else n + m or an eighth more than n, whichever is more
        capacity = m if n == 0 else max(n + m, n + max(MIN_ROOM, n // 8))
        grown = new.new_empty(*new.shape[:-2], capacity, new.shape[-1])
        if n:
            grown[..., :n, :].copy_(held)
        room = grown
    room[..., n:n + m, :].copy_(new)
    return room[..., :n + m, :], room


def make_roomy(cache, layer_idx: int | None) -> None:
    """Turns the cache's plain DynamicLayer at `layer_idx` (when there is one) into a
    RoomyLayer, in place: the same tensors, the in-place append from the next update."""
    layers = getattr(cache, "layers", None)
    if layers is not None and layer_idx is not None and layer_idx < len(layers):
        if type(layers[layer_idx]) is DynamicLayer:
            layers[layer_idx].__class__ = RoomyLayer
