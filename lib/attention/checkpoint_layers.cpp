// The attention layers of a collaborative-form checkpoint (BERT family, DistilBERT,
// ALBERT, ViT/DeiT, GPT-2): the tensor name patterns of each family, find_layers, which
// finds every layer's query/key tensors and refuses a layer left half-named, and
// load_layer, which checks a layer's shapes against each other and the head count (from
// the header alone) and its values for NaN and Inf before handing back the layer.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <regex>
#include <set>
#include <string>

#include "attention/checkpoint_parts.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

// One spelling of an attention layer: `layer` matches the layer prefix P, capturing
// the model prefix and the layer number(s); P is built from them and `middle`.
struct LayerPattern {
  std::string layer;   // regex of P
  std::string middle;  // P = capture 1 + middle with the numbers substituted
  std::string q, k;    // module names of the query and key projections after P
  bool fused = false;
  std::regex query;  // P + q + "weight"
  std::regex any;    // P + (q or k) + ("weight" or "bias")

  static std::string escaped(const std::string& module) {
    std::string out;
    for (const char c : module) out += c == '.' ? std::string(R"(\.)") : std::string(1, c);
    return out;
  }
  LayerPattern(std::string layer_re, std::string mid, std::string q_name, std::string k_name,
               bool is_fused = false)
      : layer(std::move(layer_re)),
        middle(std::move(mid)),
        q(std::move(q_name)),
        k(std::move(k_name)),
        fused(is_fused),
        query(layer + escaped(q) + "weight$"),
        any(layer + "(?:" + escaped(q) + "|" + escaped(k) + ")(?:weight|bias)$") {}
};

const std::vector<LayerPattern>& layer_patterns() {
  static const std::vector<LayerPattern> patterns = {
      {R"(^(.*)encoder\.layer\.(\d+)\.attention\.self\.)", "encoder.layer.#.attention.self.",
       "query.", "key."},
      {R"(^(.*)transformer\.layer\.(\d+)\.attention\.)", "transformer.layer.#.attention.", "q_lin.",
       "k_lin."},
      {R"(^(.*)albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.)",
       "albert_layer_groups.#.albert_layers.#.attention.", "query.", "key."},
      {R"(^(.*)encoder\.layer\.(\d+)\.attention\.attention\.)",
       "encoder.layer.#.attention.attention.", "query.", "key."},
      {R"(^(.*)encoder\.layer\.(\d+)\.attention\.)", "encoder.layer.#.attention.", "q_proj.",
       "k_proj."},
      {R"(^(.*)h\.(\d+)\.attn\.)", "h.#.attn.", "c_attn.", "c_attn.", true},
  };
  return patterns;
}

// P of a tensor a pattern matched (m), and the layer number(s) it holds.
std::string layer_prefix(const std::smatch& m, const LayerPattern& p, const std::string& tensor,
                         std::vector<int>& numbers) {
  // P = model prefix + middle with each '#' replaced by the next captured number.
  std::string prefix = m[1].str();
  std::size_t group = 2;
  for (const char c : p.middle) {
    if (c != '#') {
      prefix += c;
      continue;
    }
    prefix += m[group].str();
    numbers.push_back(detail::layer_number(m[group++].str(), tensor));
  }
  return prefix;
}

void check_heads(const std::string& name, index_t dk, index_t heads) {
  if (heads < 1 || dk % heads != 0) {
    throw DimensionMismatch("query width " + std::to_string(dk) + " of '" + name +
                            "' is not divisible by " + std::to_string(heads) + " heads");
  }
}

// GPT-2's fused c_attn: a Conv1D weight (in, 3 out) = [W_Q^T | W_K^T | W_V^T] and a
// bias (3 out); returns {D, H d}.
std::pair<index_t, index_t> check_fused_shapes(const io::SafetensorsFile& file,
                                               const LayerNames& names, index_t heads) {
  using detail::is_float_dtype, detail::shape_text;
  const io::SafetensorsEntry& w = file.at(names.query_weight);
  if (w.shape.size() != 2 || !is_float_dtype(w.dtype) || w.shape[1] % 3 != 0) {
    throw IoError("'" + w.name + "' is not a fused (in, 3 out) floating-point weight (shape " +
                  shape_text(w.shape) + ", dtype " + w.dtype + ")");
  }
  const index_t d_in = w.shape[0], dk = w.shape[1] / 3;
  check_heads(w.name, dk, heads);
  if (!names.query_bias.empty()) {
    const io::SafetensorsEntry& b = file.at(names.query_bias);
    if (b.shape != std::vector<index_t>{3 * dk} || !is_float_dtype(b.dtype)) {
      throw DimensionMismatch("bias '" + b.name + "' has shape " + shape_text(b.shape) +
                              ", expected (" + std::to_string(3 * dk) + ")");
    }
  }
  return {d_in, dk};
}

// GPT-2's fused c_attn: the row-major (D, 3 H d) Conv1D weight W holds W[i, j] = the
// weight from input i to output j, which is entry (i, j) of the column-major
// D x (H d) matrices the layer takes: the query third is columns [0, H d), the key
// third [H d, 2 H d). The query bias is the first third of the fused bias.
template <class T>
void load_fused(const io::SafetensorsFile& file, const LayerNames& names, index_t d_in, index_t dk,
                QueryKeyLayer<T>& l) {
  const Tensor<T> w = file.read<T>(names.query_weight);  // column-major 3 H d x D
  const std::vector<T>& v = w.values();
  detail::check_finite_tensor(names.query_weight, v, 3 * dk);
  l.query_weight = Matrix<T>(d_in, dk);
  l.key_weight = Matrix<T>(d_in, dk);
  for (index_t i = 0; i < d_in; ++i) {
    for (index_t j = 0; j < dk; ++j) {
      l.query_weight(i, j) = v[static_cast<std::size_t>(i * 3 * dk + j)];
      l.key_weight(i, j) = v[static_cast<std::size_t>(i * 3 * dk + dk + j)];
    }
  }
  if (!names.query_bias.empty()) {
    const std::vector<T> b = file.read<T>(names.query_bias).values();
    detail::check_finite_tensor(names.query_bias, b, 0);
    l.query_bias.assign(b.begin(), b.begin() + dk);
    l.key_bias.assign(b.begin() + dk, b.begin() + 2 * dk);
  }
}

}  // namespace

namespace detail {

int layer_number(const std::string& digits, const std::string& tensor) {
  int n = 0;
  const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (err != std::errc() || end != digits.data() + digits.size()) {
    throw IoError("layer index " + digits + " of '" + tensor + "' is too large (at most " +
                  std::to_string(std::numeric_limits<int>::max()) + ")");
  }
  return n;
}

std::pair<index_t, index_t> check_layer_shapes(const io::SafetensorsFile& file,
                                               const LayerNames& names, index_t heads) {
  if (names.fused_qkv) return check_fused_shapes(file, names, heads);
  const io::SafetensorsEntry& q = file.at(names.query_weight);
  const io::SafetensorsEntry& k = file.at(names.key_weight);
  if (q.shape.size() != 2 || !is_float_dtype(q.dtype)) {
    throw IoError("'" + q.name + "' is not a 2-D floating-point weight (shape " +
                  shape_text(q.shape) + ", dtype " + q.dtype + ")");
  }
  if (k.shape != q.shape || !is_float_dtype(k.dtype)) {
    throw DimensionMismatch("'" + k.name + "' has shape " + shape_text(k.shape) + " and dtype " +
                            k.dtype + ", but '" + q.name + "' has shape " + shape_text(q.shape));
  }
  const index_t dk = q.shape[0], d_in = q.shape[1];
  check_heads(q.name, dk, heads);
  for (const std::string& b : {names.query_bias, names.key_bias}) {
    if (b.empty()) continue;
    const io::SafetensorsEntry& e = file.at(b);
    if (e.shape != std::vector<index_t>{dk} || !is_float_dtype(e.dtype)) {
      throw DimensionMismatch("bias '" + b + "' has shape " + shape_text(e.shape) + ", expected (" +
                              std::to_string(dk) + ")");
    }
  }
  return {d_in, dk};
}

template <class T>
void check_finite_tensor(const std::string& name, const std::vector<T>& values, index_t in) {
  for (std::size_t k = 0; k < values.size(); ++k) {
    if (std::isfinite(values[k])) continue;
    const auto i = static_cast<index_t>(k);
    const std::string where =
        in > 0 ? std::to_string(i / in) + ", " + std::to_string(i % in) : std::to_string(i);
    throw InvalidArgument("'" + name + "' has a non-finite entry (" +
                          (std::isnan(values[k]) ? "NaN" : "Inf") + ") at index [" + where + "]");
  }
}

template void check_finite_tensor<float>(const std::string&, const std::vector<float>&, index_t);
template void check_finite_tensor<double>(const std::string&, const std::vector<double>&, index_t);

}  // namespace detail

std::vector<LayerNames> find_layers(const io::SafetensorsFile& file) {
  std::vector<std::pair<std::vector<int>, LayerNames>> found;
  std::set<std::string> claimed;  // the query/key tensors of the layers found
  const auto optional = [&](const std::string& name) {
    return file.find(name) ? name : std::string();
  };
  for (const io::SafetensorsEntry& e : file.tensors()) {
    for (const LayerPattern& p : layer_patterns()) {
      std::smatch m;
      if (!std::regex_match(e.name, m, p.query)) continue;
      LayerNames l;
      std::vector<int> numbers;
      l.prefix = layer_prefix(m, p, e.name, numbers);
      l.fused_qkv = p.fused;
      l.query_weight = e.name;
      l.key_weight = l.prefix + p.k + "weight";
      if (!file.find(l.key_weight)) {
        throw IoError("layer " + std::to_string(numbers.front()) + " has '" + e.name +
                      "' but no '" + l.key_weight + "'");
      }
      l.query_bias = optional(l.prefix + p.q + "bias");
      l.key_bias = optional(l.prefix + p.k + "bias");
      claimed.insert({l.query_weight, l.key_weight, l.query_bias, l.key_bias});
      found.emplace_back(numbers, std::move(l));
      break;
    }
  }
  // A key weight or a query/key bias without its query weight: that layer would be
  // left as it was, and the output be no collaborative checkpoint.
  for (const io::SafetensorsEntry& e : file.tensors()) {
    if (claimed.count(e.name)) continue;
    for (const LayerPattern& p : layer_patterns()) {
      std::smatch m;
      if (!std::regex_match(e.name, m, p.any)) continue;
      std::vector<int> numbers;
      const std::string prefix = layer_prefix(m, p, e.name, numbers);
      throw IoError("layer " + std::to_string(numbers.front()) + " has '" + e.name + "' but no '" +
                    prefix + p.q + "weight'");
    }
  }
  if (found.empty()) {
    throw IoError(
        "no attention layers found (expected BERT-style '...encoder.layer.<n>."
        "attention.self.query.weight', DistilBERT-style '...transformer.layer.<n>."
        "attention.q_lin.weight', ALBERT-style '...albert_layer_groups.<g>.albert_layers.<i>."
        "attention.query.weight', ViT/DeiT-style '...encoder.layer.<n>.attention.attention."
        "query.weight' or '...encoder.layer.<n>.attention.q_proj.weight', or GPT-2-style "
        "'...h.<n>.attn.c_attn.weight' tensors)");
  }
  // Layer order: by number (ALBERT: group, then layer in the group); ALBERT's layers
  // are numbered in that order, the others keep their own number.
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<LayerNames> layers;
  for (auto& [numbers, l] : found) {
    l.index = numbers.size() == 1 ? numbers.front() : static_cast<int>(layers.size());
    layers.push_back(std::move(l));
  }
  return layers;
}

template <class T>
QueryKeyLayer<T> load_layer(const io::SafetensorsFile& file, const LayerNames& names,
                            index_t heads) {
  const auto [d_in, dk] = detail::check_layer_shapes(file, names, heads);
  QueryKeyLayer<T> l;
  l.heads = heads;
  l.head_dim = dk / heads;
  if (names.fused_qkv) {
    load_fused(file, names, d_in, dk, l);
    l.validate();
    return l;
  }
  // (H d, D) row-major weights are the column-major D x (H d) matrices [W^1 ... W^H].
  l.query_weight = file.read_matrix<T>(names.query_weight);
  l.key_weight = file.read_matrix<T>(names.key_weight);
  detail::check_finite_tensor(names.query_weight, l.query_weight.values(), d_in);
  detail::check_finite_tensor(names.key_weight, l.key_weight.values(), d_in);
  if (!names.query_bias.empty()) {
    l.query_bias = file.read<T>(names.query_bias).values();
    detail::check_finite_tensor(names.query_bias, l.query_bias, 0);
  }
  if (!names.key_bias.empty()) {
    l.key_bias = file.read<T>(names.key_bias).values();
    detail::check_finite_tensor(names.key_bias, l.key_bias, 0);
  }
  l.validate();
  return l;
}

template QueryKeyLayer<float> load_layer<float>(const io::SafetensorsFile&, const LayerNames&,
                                                index_t);
template QueryKeyLayer<double> load_layer<double>(const io::SafetensorsFile&, const LayerNames&,
                                                  index_t);

}  // namespace tenfold::attention
