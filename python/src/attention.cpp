// tenfold._tenfold.compress, .compress_file and .analyze_file: the attention adapter
// on NumPy weights in PyTorch's (out, in) layout and on safetensors checkpoints. Ctrl-C
// stops compress and compress_file after the running ALS sweep, analyze_file after the
// running layer.
#include "tenfold/attention.hpp"

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/error.hpp"
#include "tenfold/kv_cache.hpp"

namespace tenfold::python {

namespace {

using namespace tenfold::attention;

// A 1-D bias of a float dtype T, copied.
template <class T>
std::vector<T> bias_from(const std::optional<InArray>& a, const char* what) {
  if (!a) return {};
  if (a->ndim() != 1) throw InvalidArgument(std::string(what) + " must be a 1-D array");
  Layout layout = Layout::col_major;
  const TensorView<const T> v = tensor_view<T>(*a, what, layout);
  return std::vector<T>(v.data(), v.data() + v.numel());
}

// An (out, in) weight is the column-major in x out matrix: the transpose of its NumPy shape.
template <class T>
Matrix<T> weight_from(const InArray& a, const char* what) {
  Matrix<T> m = matrix_from<T>(a, what);
  Matrix<T> t(m.cols(), m.rows());
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i) t(j, i) = m(i, j);
  return t;
}

// Row-major (rows, cols) copy of a column-major matrix given as cols x rows, i.e. the
// same memory: the shape the checkpoint writer gives it.
template <class T>
nb::object as_rows(Matrix<T>&& m) {
  const std::vector<index_t> dims{m.rows(), m.cols()};
  return owned_array(std::move(m.values()), dims, /*reverse=*/true);
}

// The fit of one compressed layer, as CompressResult and LayerReport both give it.
template <class Fit>
void put_fit(nb::dict& d, const Fit& r) {
  d["relative_error"] = r.relative_error;
  d["data_error"] = r.data_error;
  d["iterations"] = r.iterations;
  d["converged"] = r.converged;
  d["seconds"] = r.seconds;
  d["params_before"] = r.params_before;
  d["params_after"] = r.params_after;
}

template <class T>
nb::dict compress_typed(const InArray& query_weight, const InArray& key_weight,
                        const std::optional<InArray>& query_bias, index_t heads, CompressOptions o,
                        const std::optional<InArray>& input_moment,
                        const std::optional<InArray>& key_input_moment) {
  QueryKeyLayer<T> layer;
  layer.query_weight = weight_from<T>(query_weight, "query_weight");
  layer.key_weight = weight_from<T>(key_weight, "key_weight");
  layer.query_bias = bias_from<T>(query_bias, "query_bias");
  if (heads < 1) throw InvalidArgument("heads must be >= 1, got " + std::to_string(heads));
  if (layer.query_weight.cols() % heads != 0) {
    throw DimensionMismatch("heads = " + std::to_string(heads) +
                            " does not divide the query_weight rows (" +
                            std::to_string(layer.query_weight.cols()) + ")");
  }
  layer.heads = heads;
  layer.head_dim = layer.query_weight.cols() / heads;
  if (o.rank < 1 || o.rank > layer.key_dim()) {
    throw InvalidArgument("shared_dim must be in [1, H d] = [1, " +
                          std::to_string(layer.key_dim()) + "], got " + std::to_string(o.rank));
  }
  if (key_input_moment && !input_moment) {
    throw InvalidArgument("key_input_moment needs input_moment");
  }
  InputMoments moments;
  if (input_moment) {
    moments.query = matrix_from<double>(*input_moment, "input_moment");
    if (key_input_moment) moments.key = matrix_from<double>(*key_input_moment, "key_input_moment");
  }
  // After every ALS sweep: pending signals stop the run.
  Interruptible interrupt;
  o.callback = [&](const CompressProgress&) { return interrupt.check(); };
  CompressResult<T> r = interrupt.run([&] {
    try {
      return input_moment ? compress(layer, o, moments) : compress(layer, o);
    } catch (const InvalidArgument&) {
      // The library names a NaN by its (in, out) copy of a weight; say it in NumPy indices.
      for (const auto& [a, what] :
           {std::pair{&query_weight, "query_weight"}, std::pair{&key_weight, "key_weight"}}) {
        Layout layout = Layout::col_major;
        const TensorView<const T> view = tensor_view<T>(*a, what, layout);
        check_finite_numpy(view, layout, what);
      }
      throw;
    }
  });
  // The arrays and layouts the checkpoint writer stores (without the layer prefix).
  CollaborativeLayer<T>& c = r.layer;
  const index_t h = c.heads(), rank = c.rank(), d = c.input_dim();
  Matrix<T> mixing(rank, h);  // column-major R x H = row-major (H, R)
  for (index_t i = 0; i < h; ++i)
    for (index_t j = 0; j < rank; ++j) mixing(j, i) = c.mixing(i, j);
  if (c.content.size() == 0) c.content = Matrix<T>(d, h);
  nb::dict tensors;
  tensors["collab.mixing"] = as_rows(std::move(mixing));
  tensors["collab.query.weight"] = as_rows(std::move(c.query));
  tensors["collab.key.weight"] = as_rows(std::move(c.key));
  tensors["collab.content_bias.weight"] = as_rows(std::move(c.content));
  nb::dict out;
  out["tensors"] = tensors;
  put_fit(out, r);
  return out;
}

CompressOptions compress_options(index_t shared_dim, double damping, const std::string& init,
                                 int n_iter_max, double tol, std::uint64_t seed,
                                 const std::string& backend) {
  CompressOptions o;
  o.rank = shared_dim;
  o.damping = damping;
  o.init = parse_init(init);
  o.max_iters = n_iter_max;
  o.tol = tol;
  o.seed = seed;
  o.backend = parse_backend(backend);
  return o;
}

nb::dict layer_report(const LayerReport& l) {
  nb::dict d;
  d["index"] = l.index;
  d["prefix"] = l.prefix;
  put_fit(d, l);
  return d;
}

nb::dict curve(EnergyCurve&& c) {
  nb::dict d;
  const auto n = static_cast<index_t>(c.energy.size());
  d["energy"] = owned_array(std::move(c.energy), {n});
  d["cumulative"] = owned_array(std::move(c.cumulative), {n});
  d["dim90"] = c.dim90;
  d["dim95"] = c.dim95;
  d["dim99"] = c.dim99;
  return d;
}

// The shared rotary keys of one layer (rotary_keys), in the arrays tenfold.torch loads:
// key_weight (C, D'), expand (G d, C), mixing (G, C), and frequency and ranks as lists.
nb::dict rotary_keys_dict(const InArray& query_weight, const std::optional<InArray>& query_bias,
                          const InArray& key_weight, const std::optional<InArray>& key_bias,
                          index_t heads, index_t key_heads, const RotaryOptions& o,
                          const std::optional<InArray>& query_moment,
                          const std::optional<InArray>& key_moment) {
  RotaryLayer<double> layer;
  layer.heads = heads;
  layer.key_heads = key_heads;
  layer.query_weight = weight_from<double>(query_weight, "query_weight");
  layer.key_weight = weight_from<double>(key_weight, "key_weight");
  layer.query_bias = bias_from<double>(query_bias, "query_bias");
  layer.key_bias = bias_from<double>(key_bias, "key_bias");
  if (heads < 1 || layer.query_weight.cols() % heads) {
    throw DimensionMismatch("heads = " + std::to_string(heads) +
                            " does not divide the query_weight rows (" +
                            std::to_string(layer.query_weight.cols()) + ")");
  }
  layer.head_dim = layer.query_weight.cols() / heads;
  InputMoments moments;
  if (query_moment) moments.query = matrix_from<double>(*query_moment, "query_moment");
  if (key_moment) moments.key = matrix_from<double>(*key_moment, "key_moment");
  RotaryKeys r = rotary_keys(layer, o, query_moment ? &moments : nullptr);
  nb::dict d;
  d["key_weight"] = as_rows(std::move(r.latent));
  d["expand"] = owned_matrix(std::move(r.expand));
  d["mixing"] = owned_matrix(std::move(r.mixing));
  d["frequency"] = nb::cast(r.frequency);
  d["ranks"] = nb::cast(r.ranks);
  d["singular_values"] = owned_matrix(std::move(r.singular_values));
  d["relative_error"] = r.relative_error;
  d["data_error"] = r.data_error;
  d["decode_flops"] = r.decode_flops;
  d["params_before"] = r.params_before;
  d["params_after"] = r.params_after;
  d["seconds"] = r.seconds;
  return d;
}

}  // namespace

void register_attention(nb::module_& m) {
  m.def(
      "rotary_keys",
      [](const InArray& query_weight, const std::optional<InArray>& query_bias,
         const InArray& key_weight, const std::optional<InArray>& key_bias, index_t heads,
         index_t key_heads, index_t key_values, const std::vector<index_t>& ranks, index_t bands,
         const std::vector<double>& inv_freq, index_t context, double damping,
         const std::optional<InArray>& query_moment, const std::optional<InArray>& key_moment) {
        RotaryOptions o;
        o.bands = bands;
        o.key_values = key_values;
        o.ranks = ranks;
        o.inv_freq = inv_freq;
        o.context = context;
        o.damping = damping;
        return rotary_keys_dict(query_weight, query_bias, key_weight, key_bias, heads, key_heads, o,
                                query_moment, key_moment);
      },
      nb::arg("query_weight").noconvert(), nb::arg("query_bias").noconvert().none(),
      nb::arg("key_weight").noconvert(), nb::arg("key_bias").noconvert().none(), nb::arg("heads"),
      nb::arg("key_heads"), nb::arg("key_values"), nb::arg("ranks"), nb::arg("bands"),
      nb::arg("inv_freq"), nb::arg("context"), nb::arg("damping"),
      nb::arg("query_moment").noconvert().none(), nb::arg("key_moment").noconvert().none());
  m.def(
      "value_latent",
      [](const InArray& value_weight, const std::optional<InArray>& value_bias,
         const InArray& output_weight, index_t heads, index_t key_heads, index_t values,
         double damping, const std::optional<InArray>& moment,
         const std::optional<InArray>& key_weight, const std::optional<InArray>& key_bias,
         const std::optional<InArray>& query_weight, const std::optional<InArray>& query_bias,
         double key_emphasis, std::vector<double> inv_freq, index_t context) {
        ValueLayer<double> layer;
        layer.heads = heads;
        layer.key_heads = key_heads;
        layer.value_weight = weight_from<double>(value_weight, "value_weight");
        layer.value_bias = bias_from<double>(value_bias, "value_bias");
        layer.output_weight = weight_from<double>(output_weight, "output_weight");
        if (key_heads < 1 || layer.value_weight.cols() % key_heads) {
          throw DimensionMismatch("key_heads = " + std::to_string(key_heads) +
                                  " does not divide the value_weight rows (" +
                                  std::to_string(layer.value_weight.cols()) + ")");
        }
        layer.head_dim = layer.value_weight.cols() / key_heads;
        if (key_weight) layer.key_weight = weight_from<double>(*key_weight, "key_weight");
        layer.key_bias = bias_from<double>(key_bias, "key_bias");
        if (query_weight) layer.query_weight = weight_from<double>(*query_weight, "query_weight");
        layer.query_bias = bias_from<double>(query_bias, "query_bias");
        Matrix<double> s;
        if (moment) s = matrix_from<double>(*moment, "moment");
        const ValueOptions o{.values = values,
                             .damping = damping,
                             .joint = key_weight.has_value(),
                             .key_emphasis = key_emphasis,
                             .inv_freq = std::move(inv_freq),
                             .context = context};
        ValueLatent r = value_latent(layer, o, moment ? &s : nullptr);
        nb::dict d;
        d["latent"] = as_rows(std::move(r.latent));
        d["expand"] = owned_matrix(std::move(r.expand));
        d["output"] = as_rows(std::move(r.output));
        d["singular_values"] = nb::cast(r.singular_values);
        d["relative_error"] = r.relative_error;
        d["data_error"] = r.data_error;
        if (key_weight) {
          d["key_expand"] = owned_matrix(std::move(r.key_expand));
          d["key_error"] = r.key_error;
          d["key_data_error"] = r.key_data_error;
        }
        d["params_before"] = r.params_before;
        d["params_after"] = r.params_after;
        d["seconds"] = r.seconds;
        return d;
      },
      nb::arg("value_weight").noconvert(), nb::arg("value_bias").noconvert().none(),
      nb::arg("output_weight").noconvert(), nb::arg("heads"), nb::arg("key_heads"),
      nb::arg("values"), nb::arg("damping"), nb::arg("moment").noconvert().none(),
      nb::arg("key_weight").noconvert().none(), nb::arg("key_bias").noconvert().none(),
      nb::arg("query_weight").noconvert().none(), nb::arg("query_bias").noconvert().none(),
      nb::arg("key_emphasis"), nb::arg("inv_freq"), nb::arg("context"));
  // kv_cache_split: (key values, latent values) per token and layer.
  m.def(
      "kv_cache_split",
      [](double fraction, index_t cache_values, index_t bands) {
        const KvCacheSplit s = kv_cache_split(fraction, cache_values, bands);
        return nb::make_tuple(s.key_values, s.value_values);
      },
      nb::arg("fraction"), nb::arg("cache_values"), nb::arg("bands"));
  m.attr("KV_KEY_SHARE") = kKvKeyShare;
  m.def("cache_widening", &cache_widening, nb::arg("cache_dtype"), nb::arg("model_dtype"));
  m.def("value_expansion_folded", &value_expansion_folded, nb::arg("values"), nb::arg("head_dim"),
        nb::arg("hidden"));
  m.def("rotary_families", [] {
    const RotaryFamilies& f = rotary_families();
    nb::dict converted;
    for (const auto& [type, cls] : f.converted) converted[type.c_str()] = cls;
    nb::dict d;
    d["converted"] = converted;
    d["qk_norm"] = f.qk_norm;
    return d;
  });
  m.def("rotary_decode_flops", &rotary_decode_flops, nb::arg("heads"), nb::arg("key_heads"),
        nb::arg("head_dim"), nb::arg("key_values"), nb::arg("bands"));
  m.def(
      "compress",
      [](const InArray& query_weight, const InArray& key_weight,
         const std::optional<InArray>& query_bias, index_t heads, index_t shared_dim,
         const std::optional<InArray>& input_moment, const std::optional<InArray>& key_input_moment,
         double damping, const std::string& init, int n_iter_max, double tol, std::uint64_t seed,
         const std::string& backend) {
        const CompressOptions o =
            compress_options(shared_dim, damping, init, n_iter_max, tol, seed, backend);
        return float_kind(query_weight, "query_weight") == 'f'
                   ? compress_typed<float>(query_weight, key_weight, query_bias, heads, o,
                                           input_moment, key_input_moment)
                   : compress_typed<double>(query_weight, key_weight, query_bias, heads, o,
                                            input_moment, key_input_moment);
      },
      nb::arg("query_weight").noconvert(), nb::arg("key_weight").noconvert(),
      nb::arg("query_bias").noconvert().none(), nb::arg("heads"), nb::arg("shared_dim"),
      nb::arg("input_moment").noconvert().none(), nb::arg("key_input_moment").noconvert().none(),
      nb::arg("damping"), nb::arg("init"), nb::arg("n_iter_max"), nb::arg("tol"), nb::arg("seed"),
      nb::arg("backend"));
  m.def(
      "compress_file",
      [](const std::filesystem::path& input, const std::filesystem::path& output,
         index_t shared_dim, index_t heads, const std::optional<std::filesystem::path>& calibration,
         double damping, const std::string& init, int n_iter_max, double tol, std::uint64_t seed,
         const std::string& backend, bool float64) {
        CheckpointOptions o;
        o.compress = compress_options(shared_dim, damping, init, n_iter_max, tol, seed, backend);
        o.heads = heads;
        o.float64 = float64;
        if (calibration) o.calibration = *calibration;
        // After every ALS sweep and every layer: pending signals stop the run.
        Interruptible interrupt;
        o.compress.callback = [&](const CompressProgress&) { return interrupt.check(); };
        const CheckpointReport r =
            interrupt.run([&] { return compress_checkpoint(input, output, o); });
        nb::dict d;
        d["heads"] = r.heads;
        d["head_dim"] = r.head_dim;
        d["input_dim"] = r.input_dim;
        d["shared_dim"] = r.shared_dim;
        nb::list layers;
        for (const LayerReport& l : r.layers) layers.append(layer_report(l));
        d["layers"] = layers;
        d["seconds"] = r.seconds;
        d["params_before"] = r.total_params_before;
        d["params_after"] = r.total_params_after;
        d["calibration_tokens"] = r.calibration_tokens;
        d["calibration_source"] = r.calibration_source;
        return d;
      },
      nb::arg("input"), nb::arg("output"), nb::arg("shared_dim"), nb::arg("heads"),
      nb::arg("calibration").none(), nb::arg("damping"), nb::arg("init"), nb::arg("n_iter_max"),
      nb::arg("tol"), nb::arg("seed"), nb::arg("backend"), nb::arg("float64"));
  m.def(
      "analyze_file",
      [](const std::filesystem::path& input, index_t heads) {
        // After every layer: pending signals stop the run.
        Interruptible interrupt;
        std::vector<LayerRedundancy> layers = interrupt.run([&] {
          return analyze_checkpoint(input, heads,
                                    [&](const LayerRedundancy&) { return interrupt.check(); });
        });
        nb::list out;
        for (LayerRedundancy& l : layers) {
          nb::dict d;
          d["index"] = l.index;
          d["prefix"] = l.prefix;
          d["products"] = curve(std::move(l.redundancy.products));
          d["queries"] = curve(std::move(l.redundancy.queries));
          d["keys"] = curve(std::move(l.redundancy.keys));
          out.append(d);
        }
        return out;
      },
      nb::arg("input"), nb::arg("heads"));
}

}  // namespace tenfold::python
