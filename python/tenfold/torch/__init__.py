"""PyTorch side of Tenfold: collaborative attention modules and in-place conversion
of Hugging Face transformers models (docs/torch.md). Importing this module imports
torch; ``import tenfold`` alone does not."""

from ._attention import CollaborativeAttention, CollaborativeScores
from .rotary import compress_rotary, rotary_keys, store_cache
from .rotary_attention import RotarySharedKeyAttention
from .distill import collaborative_parameters, distill, mean_pool
from ._convert import (
    CONFIG_KEY,
    LayerWeights,
    attention_layers,
    compress_model,
    convert,
    from_pretrained,
    input_moments,
    load_compressed,
    write_calibration,
)

__all__ = [
    "CONFIG_KEY",
    "CollaborativeAttention",
    "CollaborativeScores",
    "LayerWeights",
    "attention_layers",
    "collaborative_parameters",
    "distill",
    "mean_pool",
    "compress_model",
    "compress_rotary",
    "rotary_keys",
    "store_cache",
    "RotarySharedKeyAttention",
    "convert",
    "from_pretrained",
    "input_moments",
    "load_compressed",
    "write_calibration",
]
