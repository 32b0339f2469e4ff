"""BERT encoder forward pass in NumPy (float64), with original or collaborative attention.

Needs only NumPy (SciPy's erf is used for GELU when it is installed). Reads and writes
safetensors files with NumPy alone, so that the tests need no other package.

Collaborative attention (docs: DESIGN.md, "The attention adapter: the math"): for a
layer whose attention prefix P has the tensors P+"collab.mixing" (H x R),
P+"collab.query.weight" (R x D), P+"collab.key.weight" (R x D) and
P+"collab.content_bias.weight" (H x D), head h's score between query token x and key
token y is  xᵀ W̃_Q diag(m_h) W̃_Kᵀ y + v_hᵀ y  with no further scaling.
"""

import json
import math
import struct

import numpy as np

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1"}


def read_safetensors(path):
    """Returns (tensors, metadata): a dict name -> NumPy array and the metadata dict."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    metadata = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n :]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = data[begin:end]
        if entry["dtype"] == "BF16":
            # bfloat16 is the upper half of a float32.
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=_DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"]).copy()
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes a dict name -> NumPy array (float64, float32, int64, ...) as safetensors."""
    names = {np.dtype(v): k for k, v in _DTYPES.items()}
    header = {}
    chunks = []
    offset = 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        raw = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": names[array.dtype.newbyteorder("<")],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)


def _erf(x):
    try:
        from scipy.special import erf
    except ImportError:
        return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)
    return erf(x)


def gelu(x):
    """The exact (erf) GELU of BERT's "gelu" activation."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_prefix(layer):
    return f"encoder.layer.{layer}.attention.self."


def layer_count(tensors):
    return len({k.split(".")[2] for k in tensors if k.startswith("encoder.layer.")})


class BertEncoder:
    """A BERT encoder read from a checkpoint (as a dict of arrays), evaluated in float64."""

    def __init__(self, tensors, heads, layer_norm_eps=1e-12):
        self.t = {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}
        self.heads = heads
        self.eps = layer_norm_eps
        self.layers = layer_count(tensors)

    def _linear(self, x, name):
        return x @ self.t[name + ".weight"].T + self.t[name + ".bias"]

    def attention_scores(self, x, layer):
        """Scores (H x n x n) of one layer for the layer input x (n x D)."""
        p = attention_prefix(layer)
        if p + "collab.mixing" in self.t:
            qs = x @ self.t[p + "collab.query.weight"].T
            ks = x @ self.t[p + "collab.key.weight"].T
            mixing = self.t[p + "collab.mixing"]
            content = x @ self.t[p + "collab.content_bias.weight"].T
            # s_h(x_i, y_j) = sum_r q_ir m_hr k_jr + v_h . y_j
            return np.einsum("ir,hr,jr->hij", qs, mixing, ks) + content.T[:, None, :]
        h = self.heads
        q = self._linear(x, p + "query").reshape(len(x), h, -1).transpose(1, 0, 2)
        k = self._linear(x, p + "key").reshape(len(x), h, -1).transpose(1, 0, 2)
        return q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])

    def forward(self, sequences, on_layer_input=None):
        """Runs each sequence (token ids, token type ids) through the encoder. Token-wise
        steps run on all tokens at once, attention sentence by sentence (no padding).
        Returns the last hidden state per sequence (n x D) and the attention
        probabilities per sequence and layer (H x n x n). on_layer_input(layer, x), when
        given, sees each layer's input tokens (all sequences, N x D) before the layer."""
        lengths = [len(ids) for ids, _ in sequences]
        bounds = np.cumsum([0] + lengths)
        ids = np.concatenate([i for i, _ in sequences])
        types = np.concatenate([t for _, t in sequences])
        positions = np.concatenate([np.arange(n) for n in lengths])
        e = "embeddings."
        x = (
            self.t[e + "word_embeddings.weight"][ids]
            + self.t[e + "position_embeddings.weight"][positions]
            + self.t[e + "token_type_embeddings.weight"][types]
        )
        x = layer_norm(x, self.t[e + "LayerNorm.weight"], self.t[e + "LayerNorm.bias"], self.eps)
        probs = [[] for _ in sequences]
        for layer in range(self.layers):
            if on_layer_input is not None:
                on_layer_input(layer, x)
            p = f"encoder.layer.{layer}."
            v = self._linear(x, p + "attention.self.value")
            context = np.empty_like(v)
            for s, (b, f) in enumerate(zip(bounds[:-1], bounds[1:])):
                a = softmax(self.attention_scores(x[b:f], layer))
                probs[s].append(a)
                vh = v[b:f].reshape(f - b, self.heads, -1).transpose(1, 0, 2)
                context[b:f] = (a @ vh).transpose(1, 0, 2).reshape(f - b, -1)
            x = layer_norm(
                x + self._linear(context, p + "attention.output.dense"),
                self.t[p + "attention.output.LayerNorm.weight"],
                self.t[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            inner = gelu(self._linear(x, p + "intermediate.dense"))
            x = layer_norm(
                x + self._linear(inner, p + "output.dense"),
                self.t[p + "output.LayerNorm.weight"],
                self.t[p + "output.LayerNorm.bias"],
                self.eps,
            )
        return [x[b:f] for b, f in zip(bounds[:-1], bounds[1:])], probs


def sentence_embedding(hidden):
    """Mean pooling over the tokens, then L2 normalisation (sentence-transformers)."""
    pooled = hidden.mean(axis=0)
    return pooled / max(np.linalg.norm(pooled), 1e-12)


def head_slices(tensors, layer, heads):
    """W_Q^h, W_K^h (H x D x d each) and b_Q (H x d) of one layer, in float64."""
    p = attention_prefix(layer)
    wq = np.asarray(tensors[p + "query.weight"], dtype=np.float64)
    wk = np.asarray(tensors[p + "key.weight"], dtype=np.float64)
    bq = np.asarray(tensors[p + "query.bias"], dtype=np.float64)
    dk, width = wq.shape
    d = dk // heads
    # Head h owns rows h*d .. (h+1)*d-1 of the (out x in) weights.
    return (
        wq.reshape(heads, d, width).transpose(0, 2, 1),
        wk.reshape(heads, d, width).transpose(0, 2, 1),
        bq.reshape(heads, d),
    )


def attention_tensor(tensors, layer, heads):
    """T[h] = W_Q^h W_K^hᵀ / sqrt(d), H x D x D, in float64."""
    wq, wk, _ = head_slices(tensors, layer, heads)
    return np.einsum("hai,hbi->hab", wq, wk) / math.sqrt(wq.shape[-1])


def content_bias(tensors, layer, heads):
    """v_h = W_K^h b_Q^h / sqrt(d), H x D, in float64."""
    _, wk, bq = head_slices(tensors, layer, heads)
    return np.einsum("hai,hi->ha", wk, bq) / math.sqrt(wk.shape[-1])


def collab_tensors(mixing, query, key, content):
    """The four collaborative tensors of one layer under their names (without prefix)."""
    return {
        "collab.mixing": mixing,
        "collab.query.weight": query,
        "collab.key.weight": key,
        "collab.content_bias.weight": content,
    }


def replace_query_key(tensors, layer_collab, dtype=np.float32):
    """A checkpoint with each layer's query/key weights and biases replaced by its
    collaborative tensors (layer_collab: layer -> dict from collab_tensors)."""
    replaced = tuple(attention_prefix(layer) + side
                     for layer in layer_collab for side in ("query.", "key."))
    out = {k: v for k, v in tensors.items() if not k.startswith(replaced)}
    for layer, collab in layer_collab.items():
        for name, value in collab.items():
            out[attention_prefix(layer) + name] = np.asarray(value, dtype=dtype)
    return out


def full_rank_collab(tensors, layer, heads):
    """The exact collaborative form of one layer: block-of-ones mixing (times 1/sqrt(d)),
    W̃_Q, W̃_K the stacked head projections, content bias kept."""
    p = attention_prefix(layer)
    wq = np.asarray(tensors[p + "query.weight"], dtype=np.float64)
    dk = wq.shape[0]
    d = dk // heads
    mixing = np.kron(np.eye(heads), np.ones((1, d))) / math.sqrt(d)
    return collab_tensors(
        mixing, wq, np.asarray(tensors[p + "key.weight"], dtype=np.float64),
        content_bias(tensors, layer, heads))


def qk_relative_error(original, compressed, layer, heads):
    """||T - [[M, W̃_Q, W̃_K]]|| / ||T|| for one layer, in float64."""
    t = attention_tensor(original, layer, heads)
    p = attention_prefix(layer)
    m = np.asarray(compressed[p + "collab.mixing"], dtype=np.float64)
    q = np.asarray(compressed[p + "collab.query.weight"], dtype=np.float64)
    k = np.asarray(compressed[p + "collab.key.weight"], dtype=np.float64)
    approx = np.einsum("hr,ra,rb->hab", m, q, k, optimize=True)
    return float(np.linalg.norm(t - approx) / np.linalg.norm(t))


def cumulative_energy(squared):
    """Fractions of the total held by the k largest of `squared`, for k = 1, 2, ..."""
    s = np.sort(np.clip(squared, 0.0, None))[::-1]
    return np.cumsum(s) / s.sum()


def dims_for(cumulative, thresholds):
    """The smallest k whose k leading dimensions hold each threshold's share."""
    return [int(np.searchsorted(cumulative, t) + 1) for t in thresholds]


def unfolding_energy(a, b):
    """Cumulative energy of [a_1 b_1ᵀ | ... | a_H b_Hᵀ] (a, b: H x D x d), from its Gram
    sum_h a_h (b_hᵀ b_h) a_hᵀ."""
    gram = np.einsum("hai,hij,hbj->ab", a, np.einsum("hai,haj->hij", b, b), a, optimize=True)
    return cumulative_energy(np.linalg.eigvalsh(gram))


def energy_curves(tensors, layer, heads):
    """Cumulative energy (squared singular values) of the products P = [P_1 | ... | P_H],
    P_h = W_Q^h W_K^hᵀ, of the concatenated queries W_Q and of the concatenated keys W_K
    of one layer."""
    wq, wk, _ = head_slices(tensors, layer, heads)

    def squared_singular_values(w):
        return np.linalg.svd(w.reshape(len(w), -1), compute_uv=False) ** 2

    return {
        "products": unfolding_energy(wq, wk),
        "queries": cumulative_energy(squared_singular_values(wq.transpose(1, 0, 2))),
        "keys": cumulative_energy(squared_singular_values(wk.transpose(1, 0, 2))),
    }


def qk_error_lower_bound(tensors, layer, heads, rank):
    """A floor under the QK relative error of any rank-R CP model: its query-side
    unfolding P = [P_1 | ... | P_H] (D x H D) and its key-side one have rank at most R,
    so the error is at least the share of energy that the best rank-R approximation of
    either leaves out (Eckart-Young)."""
    wq, wk, _ = head_slices(tensors, layer, heads)
    left = 0.0
    for cumulative in (unfolding_energy(wq, wk), unfolding_energy(wk, wq)):
        if rank < len(cumulative):
            left = max(left, 1.0 - cumulative[rank - 1])
    return math.sqrt(max(left, 0.0))


def per_head_truncation_error(tensors, layer, heads, rank):
    """QK relative error of the best rank-R CP model that shares no component between
    heads: each head's T[h] split into its singular triplets, the R largest kept."""
    t = attention_tensor(tensors, layer, heads)
    energy = np.sort(np.concatenate(
        [np.linalg.svd(t[h], compute_uv=False) ** 2 for h in range(heads)]))[::-1]
    return math.sqrt(energy[rank:].sum() / energy.sum())
