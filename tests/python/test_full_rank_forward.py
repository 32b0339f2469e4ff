"""Full-rank `tenfold attention compress` of a tiny random BERT checkpoint: the
collaborative forward pass equals the original one. The NumPy forward pass used as the
oracle (bench/real_model/bertnp.py) is checked first on its own exact full-rank form.

Needs only NumPy. The program is taken from the environment variable TENFOLD_CLI
(ctest sets it). The checkpoint has 2 layers, 2 heads of width 4 and a model width of
12, so that head width times heads (8) differs from the model width; it is stored in
float32, as real checkpoints are, and the output of the program is float32 too.

Tolerance: both forward passes run in float64 on float32 parameters. At full rank the
collaborative parameters are the original ones rearranged (mixing 1/sqrt(4) = 0.5 is
exact), except the content bias W_K^h b_Q^h / sqrt(d), computed from the float32
inputs and rounded to float32 once (relative error 6e-8). Scores, softmax, two
layers and their LayerNorms amplify that by far less than 100, so 1e-5 (float32
round-off with margin) is a bound that a wrong layout, scale or bias breaks by orders
of magnitude.
"""

import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "real_model"))
import bertnp  # noqa: E402

HEADS, HEAD_DIM, WIDTH, INNER, LAYERS, VOCAB, POSITIONS = 2, 4, 12, 16, 2, 20, 16
TOLERANCE = 1e-5


def tiny_bert(rng):
    """Random float32 tensors named as in a Hugging Face BERT checkpoint."""
    dk = HEADS * HEAD_DIM

    def w(*shape):
        return (rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)

    def b(n):
        return (0.5 * rng.standard_normal(n)).astype(np.float32)

    t = {
        "embeddings.word_embeddings.weight": w(VOCAB, WIDTH),
        "embeddings.position_embeddings.weight": w(POSITIONS, WIDTH),
        "embeddings.token_type_embeddings.weight": w(2, WIDTH),
        "embeddings.LayerNorm.weight": (1 + b(WIDTH)).astype(np.float32),
        "embeddings.LayerNorm.bias": b(WIDTH),
        "embeddings.position_ids": np.arange(POSITIONS, dtype=np.int64)[None, :],
    }
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}."
        for name, (rows, cols) in {
            "attention.self.query": (dk, WIDTH),
            "attention.self.key": (dk, WIDTH),
            "attention.self.value": (dk, WIDTH),
            "attention.output.dense": (WIDTH, dk),
            "intermediate.dense": (INNER, WIDTH),
            "output.dense": (WIDTH, INNER),
        }.items():
            # Scores of order a few units, so that the softmax is far from uniform.
            scale = 3.0 if name.endswith(("query", "key")) else 1.0
            t[p + name + ".weight"] = (scale * w(rows, cols)).astype(np.float32)
            t[p + name + ".bias"] = b(rows)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + name + ".weight"] = (1 + b(WIDTH)).astype(np.float32)
            t[p + name + ".bias"] = b(WIDTH)
    return t


def random_sequences(rng):
    return [(rng.integers(0, VOCAB, n), rng.integers(0, 2, n)) for n in (5, 9, 13)]


class NumPyFullRankForm(unittest.TestCase):
    """The oracle itself: the exact collaborative form built here in float64 gives the
    original forward pass to float64 round-off."""

    def test_forward_pass_equals_original(self):
        rng = np.random.default_rng(3)
        original = tiny_bert(rng)
        sequences = random_sequences(rng)
        collab = {i: bertnp.full_rank_collab(original, i, HEADS) for i in range(LAYERS)}
        compressed = bertnp.replace_query_key(original, collab, dtype=np.float64)
        hidden0, probs0 = bertnp.BertEncoder(original, HEADS).forward(sequences)
        hidden1, probs1 = bertnp.BertEncoder(compressed, HEADS).forward(sequences)
        for s in range(len(sequences)):
            for p0, p1 in zip(probs0[s], probs1[s]):
                np.testing.assert_allclose(p1, p0, rtol=0, atol=1e-12)
            np.testing.assert_allclose(hidden1[s], hidden0[s], rtol=0,
                                       atol=1e-12 * np.abs(hidden0[s]).max())


class FullRankForward(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cli = os.environ.get("TENFOLD_CLI")
        if not cli:
            raise RuntimeError("set TENFOLD_CLI to the tenfold program")
        rng = np.random.default_rng(7)
        cls.original = tiny_bert(rng)
        cls.sequences = random_sequences(rng)
        with tempfile.TemporaryDirectory() as tmp:
            model, out = Path(tmp) / "tiny.safetensors", Path(tmp) / "collab.safetensors"
            bertnp.write_safetensors(model, cls.original)
            subprocess.run([cli, "attention", "compress", str(model), "--shared-dim",
                            str(HEADS * HEAD_DIM), "--heads", str(HEADS), "--out", str(out)],
                           check=True)
            cls.compressed, cls.metadata = bertnp.read_safetensors(out)

    def test_query_key_replaced_and_the_rest_copied(self):
        for layer in range(LAYERS):
            p = bertnp.attention_prefix(layer)
            for name in ("query.weight", "query.bias", "key.weight", "key.bias"):
                self.assertNotIn(p + name, self.compressed)
            shapes = {"collab.mixing": (HEADS, HEADS * HEAD_DIM),
                      "collab.query.weight": (HEADS * HEAD_DIM, WIDTH),
                      "collab.key.weight": (HEADS * HEAD_DIM, WIDTH),
                      "collab.content_bias.weight": (HEADS, WIDTH)}
            for name, shape in shapes.items():
                self.assertEqual(self.compressed[p + name].shape, shape, p + name)
        for name, value in self.original.items():
            if ".query." in name or ".key." in name:
                continue
            self.assertEqual(self.compressed[name].dtype, value.dtype, name)
            self.assertEqual(self.compressed[name].tobytes(), value.tobytes(), name)
        self.assertEqual(int(self.metadata["tenfold.shared_dim"]), HEADS * HEAD_DIM)
        self.assertEqual(int(self.metadata["tenfold.heads"]), HEADS)
        self.assertEqual(int(self.metadata["tenfold.head_dim"]), HEAD_DIM)

    def test_attention_tensor_is_exact(self):
        for layer in range(LAYERS):
            error = bertnp.qk_relative_error(self.original, self.compressed, layer, HEADS)
            self.assertLess(error, TOLERANCE, f"layer {layer}")

    def test_forward_pass_equals_original(self):
        hidden0, probs0 = bertnp.BertEncoder(self.original, HEADS).forward(self.sequences)
        hidden1, probs1 = bertnp.BertEncoder(self.compressed, HEADS).forward(self.sequences)
        for s, (h0, h1) in enumerate(zip(hidden0, hidden1)):
            for layer, (p0, p1) in enumerate(zip(probs0[s], probs1[s])):
                # The attention must be far from uniform for the check to mean anything.
                self.assertGreater(p0.max(), 0.5)
                np.testing.assert_allclose(p1, p0, rtol=0, atol=TOLERANCE,
                                           err_msg=f"sequence {s}, layer {layer}")
            gap = np.abs(h1 - h0).max() / np.abs(h0).max()
            self.assertLess(gap, TOLERANCE, f"sequence {s}: hidden state")


if __name__ == "__main__":
    unittest.main()
