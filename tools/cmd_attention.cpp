// tenfold attention compress|analyze: multi-head attention to collaborative form.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "layer_table.hpp"
#include "staged_files.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/error.hpp"

namespace tenfold::cli {
namespace {

struct CompressArgs {
  std::string input, out, report;
  std::string shared_dim;     // a positive integer, or "full" (rotary checkpoints)
  std::string value_dim;      // rotary checkpoints only: a positive integer, or "full"
  double kv_cache = 0.0;      // rotary checkpoints only: a fraction of the key and value cache
  index_t bands = 0;          // rotary checkpoints only
  bool joint = false;         // rotary checkpoints only: one latent for keys and values
  std::string cache_dtype;    // rotary checkpoints only: "", bfloat16 or float8_e4m3fn
  double key_emphasis = 0.0;  // --joint only: keys weighted by the queries, this emphasis
  index_t context = attention::RotaryOptions{}.context;
  index_t heads = 0;
  int max_iters = 100;
  double tol = 1e-6;
  std::string init = "structured";
  std::uint64_t seed = 0;
  std::string dtype = "float32";
  bool float64 = false;  // deprecated spelling of --dtype float64
  bool quiet = false;
  std::string backend = "cpu";
  std::string calibration;
  double damping = attention::CompressOptions{}.damping;
  // Options given on the command line, for refusing those that do not apply.
  std::vector<std::string> given;
};

bool given(const CompressArgs& a, const std::string& flag) {
  return std::find(a.given.begin(), a.given.end(), flag) != a.given.end();
}

// --shared-dim, --value-dim: "full" (0; rotary checkpoints only) or an integer, whose
// range the conversion checks (collaborative form: 1..H d; rotary: 1..G d).
index_t parse_size(const std::string& text, bool rotary, const std::string& flag = "--shared-dim") {
  if (text == "full") {
    if (!rotary) {
      throw InvalidArgument(
          "--shared-dim full applies to rotary checkpoints; give the shared "
          "dimension R (H d is the exact form)");
    }
    return 0;
  }
  index_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || (rotary && v < 1)) {
    throw InvalidArgument(flag + " must be a" + std::string(rotary ? " positive" : "n") +
                          " integer" + (rotary ? " or full" : "") + ", got '" + text + "'");
  }
  return v;
}

// "n" or, when the layers differ (full size of rank-deficient layers), "least-most".
template <class Size>
std::string size_range(const std::vector<attention::RotaryLayerReport>& layers, Size size) {
  index_t least = size(layers.front()), most = least;
  for (const attention::RotaryLayerReport& l : layers) {
    least = std::min(least, size(l));
    most = std::max(most, size(l));
  }
  return least == most ? std::to_string(most) : std::to_string(least) + "-" + std::to_string(most);
}

// Rotary checkpoints (Llama, Qwen2, Mistral): shared rotary keys, the rotary report.
int run_rotary(const CompressArgs& a) {
  for (const char* flag : {"--heads", "--max-iters", "--tol", "--init", "--seed", "--backend"}) {
    if (given(a, flag)) {
      throw InvalidArgument(std::string(flag) +
                            " does not apply to rotary checkpoints (their conversion is one SVD "
                            "per band, on the cpu)");
    }
  }
  attention::RotaryCheckpointOptions o;
  o.joint = a.joint;
  o.cache_dtype = a.cache_dtype;
  const bool kv_cache = given(a, "--kv-cache");
  if (kv_cache) o.kv_cache = a.kv_cache;
  // --kv-cache 1/w with a cache of w numbers in the bytes of one of the model's: no solver
  const bool whole = given(a, "--cache-dtype") && attention::keeps_whole(a.input, o);
  if (whole) {
    char fraction[32];  // as typed: the shortest text that reads back as the number
    const auto [end, ec] = std::to_chars(fraction, fraction + sizeof fraction, a.kv_cache);
    for (const char* flag : {"--bands", "--context", "--value-dim", "--shared-dim"}) {
      if (given(a, flag)) {
        throw InvalidArgument(std::string(flag) + " does not apply to --kv-cache " +
                              std::string(fraction, ec == std::errc() ? end : fraction) +
                              " with --cache-dtype " + a.cache_dtype +
                              ": every key and value is kept whole");
      }
    }
  } else if (a.joint) {
    for (const char* flag : {"--bands", "--context", "--value-dim"}) {
      if (given(a, flag)) {
        throw InvalidArgument(std::string(flag) +
                              " does not apply to --joint (one latent for keys and values, every "
                              "key rebuilt from all of it)");
      }
    }
  } else if (given(a, "--key-emphasis")) {
    throw InvalidArgument(
        "--key-emphasis applies to --joint (the joint latent's keys beside its values)");
  } else if (!given(a, "--bands")) {
    throw InvalidArgument(
        "a rotary checkpoint needs --bands: adjacent frequency pairs per band "
        "(a divisor of d/2; 1: complex keys shared per pair; docs/rope.md compares them) "
        "or --joint");
  }
  for (const char* flag : {"--shared-dim", "--value-dim"}) {
    if (kv_cache && given(a, flag)) {
      throw InvalidArgument(std::string("--kv-cache sets both the key and the value cache: give it "
                                        "without ") +
                            flag);
    }
  }
  if (!kv_cache && !given(a, "--shared-dim")) {
    throw InvalidArgument(
        "a rotary checkpoint needs --shared-dim (key values per token and layer) or --kv-cache "
        "(a fraction of the key and value cache)");
  }
  o.rotary.bands = a.joint || whole ? 1 : a.bands;
  if (given(a, "--key-emphasis")) o.key_emphasis = a.key_emphasis;
  if (!kv_cache) o.rotary.key_values = parse_size(a.shared_dim, true);
  if (given(a, "--value-dim")) o.values = parse_size(a.value_dim, true, "--value-dim");
  o.rotary.context = a.context;
  o.rotary.damping = given(a, "--damping") ? a.damping : attention::RotaryOptions{}.damping;
  o.float64 = a.float64 || a.dtype == "float64";
  o.calibration = a.calibration;
  const bool data = !a.calibration.empty();
  std::function<void(const attention::RotaryLayerReport&)> progress;
  if (!a.quiet) {
    progress = [](const attention::RotaryLayerReport& l) {
      std::fprintf(stderr, "layer %2d  key values %4lld  QK error %.6f", l.index,
                   static_cast<long long>(l.key_values), l.relative_error);
      if (l.data_error) std::fprintf(stderr, "  data error %.6f", *l.data_error);
      if (l.value_error) {
        std::fprintf(stderr, "  value values %4lld  value error %.6f",
                     static_cast<long long>(l.value_values), *l.value_error);
      }
      if (l.value_data_error) std::fprintf(stderr, "  value data error %.6f", *l.value_data_error);
      std::fprintf(stderr, "  %7.2f s\n", l.seconds);
    };
  }
  // Every output is written in full before any replaces what was there.
  StagedFiles staged;
  const attention::RotaryCheckpointReport rep =
      attention::compress_rotary_checkpoint(a.input, staged.stage(a.out), o, progress);
  const attention::RotaryConfig& c = rep.config;

  const std::optional<CalibrationUse> calibration =
      calibration_use(a.calibration, rep, o.rotary.damping);
  std::vector<LayerColumn> lead = {{"key values", 10, "key_values"}}, errors;
  if (rep.values) {
    lead.push_back({"value values", 12, "value_values"});
    errors.push_back({"value error", 12, "value_relative_error"});
    if (data) errors.push_back({"value data error", 16, "value_data_relative_error"});
  }
  LayerTable table(data, lead, {{"decode flops", 13, "decode_flops"}}, errors);
  for (const attention::RotaryLayerReport& l : rep.layers) {
    LayerRow row = common_row(l);
    row.lead = {l.key_values};
    row.trail = {l.decode_flops};
    row.more = {{"ranks", l.ranks}};
    if (rep.values) {
      row.lead.push_back(l.value_values);
      row.errors.push_back(*l.value_error);
      if (data) row.errors.push_back(*l.value_data_error);
      row.more.update({{"value_params_before", l.value_params_before},
                       {"value_params_after", l.value_params_after}});
    }
    table.add(row);
  }
  const std::string keys = size_range(rep.layers, [](const auto& l) { return l.key_values; }) +
                           (rep.key_values == 0 ? " (full)" : "");
  std::printf(
      "%s: bands %lld, key cache %s values per token and layer (of %lld: %lld key heads x head dim "
      "%lld; %lld query heads, width %lld): query/key parameters %lld -> %lld, model %lld -> "
      "%lld, %.2f s\n",
      c.family.c_str(), static_cast<long long>(rep.bands), keys.c_str(),
      static_cast<long long>(rep.original_key_values), static_cast<long long>(c.key_heads),
      static_cast<long long>(c.head_dim), static_cast<long long>(c.heads),
      static_cast<long long>(c.hidden_size), static_cast<long long>(table.params_before()),
      static_cast<long long>(table.params_after()), static_cast<long long>(rep.total_params_before),
      static_cast<long long>(rep.total_params_after), rep.seconds);
  if (rep.values) {
    // The whole cache per token and layer: keys and latent values (the joint latent once)
    // against 2 G d.
    index_t cached = 0;
    for (const attention::RotaryLayerReport& l : rep.layers)
      cached += l.key_values + (o.joint ? 0 : l.value_values);
    const double share =
        static_cast<double>(cached) / (2.0 * static_cast<double>(rep.original_key_values) *
                                       static_cast<double>(rep.layers.size()));
    const std::string sizes = size_range(rep.layers, [](const auto& l) { return l.value_values; });
    const std::string what =
        o.joint ? "joint latent " + sizes + " values per token and layer for keys and values"
                : "value cache " + sizes + " latent values per token and layer";
    std::printf("%s (of %lld)%s: KV cache %.1f %% of the original\n", what.c_str(),
                static_cast<long long>((o.joint ? 2 : 1) * rep.original_key_values),
                rep.value_values == 0 ? " (full)" : "", 100.0 * share);
  }
  if (rep.whole) {
    std::printf(
        "keys and values whole (%lld each per token and layer), stored in %s: KV cache "
        "%.1f %% of the original's bytes\n",
        static_cast<long long>(rep.original_key_values), a.cache_dtype.c_str(),
        100.0 / static_cast<double>(rep.cache_widening));
  } else if (!a.cache_dtype.empty()) {
    std::printf("cache stored in %s: 1/%lld of the bytes of the sizes above\n",
                a.cache_dtype.c_str(), static_cast<long long>(rep.cache_widening));
  }
  print_calibration(calibration);
  if (!a.report.empty()) {
    nlohmann::json report =
        layer_report(a.input, a.out, o.float64, calibration, table, rep.total_params_before,
                     rep.total_params_after, rep.seconds);
    const auto size = [](index_t v) { return v == 0 ? nlohmann::json("full") : nlohmann::json(v); };
    report.update({{"family", c.family},
                   {"shared_dim", size(rep.key_values)},
                   {"value_dim", rep.values ? size(rep.value_values) : nlohmann::json(nullptr)},
                   {"kv_cache", kv_cache ? nlohmann::json(a.kv_cache) : nlohmann::json(nullptr)},
                   {"bands", rep.bands},
                   {"joint", a.joint},
                   {"whole", rep.whole},
                   {"cache_dtype", a.cache_dtype.empty() ? nlohmann::json(nullptr)
                                                         : nlohmann::json(a.cache_dtype)},
                   {"context", o.rotary.context},
                   {"heads", c.heads},
                   {"key_heads", c.key_heads},
                   {"head_dim", c.head_dim},
                   {"input_dim", c.hidden_size},
                   {"rope_type", c.rope_type},
                   {"original_key_values", rep.original_key_values}});
    write_json(staged.stage(a.report), report);
  }
  staged.commit();
  return 0;
}

struct AnalyzeArgs {
  std::string input;
  index_t heads = 0;
  bool json = false;
};

int run_compress(const CompressArgs& a) {
  std::vector<Output> outputs = {{"--out", a.out, false}};
  if (!a.report.empty()) outputs.push_back({"--report", a.report, false});
  // Every file the command reads is an input: the checkpoint, the config.json beside
  // it, the calibration statistics.
  std::vector<std::filesystem::path> inputs = {a.input};
  if (const auto config = attention::config_path(a.input); std::filesystem::exists(config)) {
    inputs.push_back(config);
  }
  if (!a.calibration.empty()) inputs.push_back(a.calibration);
  check_outputs(outputs, inputs);
  if (attention::is_rotary_checkpoint(a.input)) return run_rotary(a);
  for (const char* flag : {"--bands", "--context", "--kv-cache", "--value-dim", "--joint",
                           "--key-emphasis", "--cache-dtype"}) {
    if (!given(a, flag)) continue;
    const std::filesystem::path config = attention::config_path(a.input);
    if (!std::filesystem::exists(config)) {
      throw InvalidArgument(std::string(flag) + " applies to rotary checkpoints, which are told " +
                            "by the config.json beside the input, and '" + config.string() +
                            "' is missing");
    }
    throw InvalidArgument(std::string(flag) +
                          " applies to rotary checkpoints (llama, qwen2, mistral in the "
                          "config.json beside the input)");
  }
  if (!given(a, "--shared-dim")) throw CLI::RequiredError("--shared-dim");
  attention::CheckpointOptions o;
  o.compress.rank = parse_size(a.shared_dim, false);
  o.compress.max_iters = a.max_iters;
  o.compress.tol = a.tol;
  o.compress.init = attention::parse_init(a.init);
  o.compress.seed = a.seed;
  o.compress.backend = parse_backend(a.backend);
  o.compress.damping = a.damping;
  o.heads = a.heads;
  o.float64 = a.float64 || a.dtype == "float64";
  o.calibration = a.calibration;
  const bool data = !a.calibration.empty();
  if (!a.quiet) {
    o.on_layer = [](const attention::LayerReport& l) {
      std::fprintf(stderr, "layer %2d  QK error %.6f", l.index, l.relative_error);
      if (l.data_error) std::fprintf(stderr, "  data error %.6f", *l.data_error);
      std::fprintf(stderr, "  %4d iterations  %7.2f s\n", l.iterations, l.seconds);
    };
  }
  // Every output is written in full before any replaces what was there.
  StagedFiles staged;
  const attention::CheckpointReport rep =
      attention::compress_checkpoint(a.input, staged.stage(a.out), o);

  const std::optional<CalibrationUse> calibration = calibration_use(a.calibration, rep, a.damping);
  LayerTable table(data, {}, {{"iterations", 10, "iterations"}});
  for (const attention::LayerReport& l : rep.layers) {
    LayerRow row = common_row(l);
    row.trail = {l.iterations};
    row.more = {{"converged", l.converged}};
    table.add(row);
  }
  const index_t before = table.params_before(), after = table.params_after();
  std::printf(
      "shared dim %lld (heads %lld x head dim %lld, width %lld): query/key parameters "
      "%lld -> %lld, model %lld -> %lld, %.2f s\n",
      static_cast<long long>(rep.shared_dim), static_cast<long long>(rep.heads),
      static_cast<long long>(rep.head_dim), static_cast<long long>(rep.input_dim),
      static_cast<long long>(before), static_cast<long long>(after),
      static_cast<long long>(rep.total_params_before),
      static_cast<long long>(rep.total_params_after), rep.seconds);
  // R near H d gives more parameters than the input had: compression needs a smaller R.
  const bool larger = after > before;
  if (larger) {
    std::fprintf(stderr,
                 "tenfold attention compress: warning: --shared-dim %lld makes the query/key "
                 "side larger, not smaller (%lld -> %lld parameters); choose a smaller "
                 "--shared-dim to compress\n",
                 static_cast<long long>(rep.shared_dim), static_cast<long long>(before),
                 static_cast<long long>(after));
  }
  print_calibration(calibration);
  if (!a.report.empty()) {
    nlohmann::json report =
        layer_report(a.input, a.out, o.float64, calibration, table, rep.total_params_before,
                     rep.total_params_after, rep.seconds);
    report.update({{"shared_dim", rep.shared_dim},
                   {"heads", rep.heads},
                   {"head_dim", rep.head_dim},
                   {"input_dim", rep.input_dim},
                   {"init", a.init},
                   {"max_iters", a.max_iters},
                   {"tol", a.tol},
                   {"scale_convention", "scale folded into mixing and content_bias"},
                   {"larger_than_input", larger}});
    write_json(staged.stage(a.report), report);
  }
  staged.commit();
  return 0;
}

nlohmann::json curve_json(const attention::EnergyCurve& c) {
  return {{"dim90", c.dim90},
          {"dim95", c.dim95},
          {"dim99", c.dim99},
          {"energy", c.energy},
          {"cumulative", c.cumulative}};
}

int run_analyze(const AnalyzeArgs& a) {
  const auto layers = attention::analyze_checkpoint(a.input, a.heads);
  if (a.json) {
    nlohmann::json j = {{"input", a.input}, {"layers", nlohmann::json::array()}};
    for (const auto& l : layers) {
      j["layers"].push_back({{"index", l.index},
                             {"prefix", l.prefix},
                             {"products", curve_json(l.redundancy.products)},
                             {"queries", curve_json(l.redundancy.queries)},
                             {"keys", curve_json(l.redundancy.keys)}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("dimensions holding 90/95/99 %% of the energy\n");
  std::printf("%-6s %16s %16s %16s\n", "layer", "P = [P_1..P_H]", "W_Q", "W_K");
  const auto dims = [](const attention::EnergyCurve& c) {
    return std::to_string(c.dim90) + "/" + std::to_string(c.dim95) + "/" + std::to_string(c.dim99);
  };
  for (const auto& l : layers) {
    std::printf("%-6d %16s %16s %16s\n", l.index, dims(l.redundancy.products).c_str(),
                dims(l.redundancy.queries).c_str(), dims(l.redundancy.keys).c_str());
  }
  return 0;
}

}  // namespace

Command add_attention_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("attention",
                         "Rewrite multi-head attention into collaborative form (compress), or "
                         "measure how much the heads share (analyze)");
  cmd->require_subcommand(1);

  auto c = std::make_shared<CompressArgs>();
  CLI::App* compress = cmd->add_subcommand(
      "compress",
      "CP of each layer's stacked W_Q^h W_K^h^T / sqrt(d) at rank R = --shared-dim. Every "
      "other tensor is copied bit for bit; each layer's query/key weights and biases become "
      "<P>collab.mixing (H x R), <P>collab.query.weight (R x D), <P>collab.key.weight (R x D) "
      "and <P>collab.content_bias.weight (H x D).");
  compress
      ->add_option("input", c->input,
                   "Checkpoint (.safetensors): BERT-family, DistilBERT, ALBERT, ViT/DeiT, GPT-2, "
                   "or a rotary Llama / Qwen2 / Mistral (config.json beside it)")
      ->required();
  compress->add_option_function<std::string>(
      "-r,--shared-dim",
      [c](const std::string& text) {
        // Malformed or out-of-range integers are usage errors, like every integer option.
        if (text != "full") parse_integer<index_t>("--shared-dim", text);
        c->shared_dim = text;
      },
      "Shared key/query dimension R, 1..H*d (H*d, the exact form, and values near "
      "it make the model larger); rotary checkpoints: key values cached per token "
      "and layer, 1..G*d, or full (the smallest exact size); required unless --kv-cache");
  compress->add_option_function<std::string>(
      "--value-dim",
      [c](const std::string& text) {
        if (text != "full") parse_integer<index_t>("--value-dim", text);
        c->value_dim = text;
      },
      "Rotary checkpoints: also cache the values as latent values shared by all value heads, "
      "this many per token and layer (1..G*d, or full: the smallest exact size), the rebuild "
      "folded into o_proj where that multiplies fewer weights (docs/kv-cache.md)");
  compress->add_option("--kv-cache", c->kv_cache,
                       "Rotary checkpoints, instead of --shared-dim and --value-dim: keep this "
                       "fraction in (0, 1] of the original key and value cache per token, a "
                       "third of it shared keys, the rest latent values (docs/kv-cache.md)");
  compress->add_flag("--joint", c->joint,
                     "Rotary checkpoints: one latent for keys and values (--shared-dim or all of "
                     "--kv-cache's values per token and layer), the keys rebuilt from it and "
                     "rotated at read time (docs/kv-cache.md)");
  compress
      ->add_option("--cache-dtype", c->cache_dtype,
                   "Rotary checkpoints: the converted model stores its cache in bfloat16 (float32 "
                   "checkpoints) or float8_e4m3fn (float32, bfloat16, float16), and --kv-cache "
                   "counts those bytes: 1/w (w numbers in the bytes of one of the model's) keeps "
                   "every key and value whole, less is the conversion of w times it "
                   "(tenfold.torch's cache_dtype, docs/kv-cache.md)")
      ->check(CLI::IsMember({"bfloat16", "float8_e4m3fn"}));
  compress->add_option("--key-emphasis", c->key_emphasis,
                       "With --joint: weigh each key head by its queries' coherence and the keys "
                       "against the values by this factor > 0 (tenfold.torch's key_weighting; "
                       "2.5 at half the cache of SmolLM2-135M, docs/kv-cache.md); default: keys "
                       "and values at equal energy");
  add_integer_option(*compress, "--bands", c->bands,
                     "Rotary checkpoints: adjacent frequency pairs per band (a divisor of d/2; "
                     "1: complex keys shared per frequency pair)",
                     index_t{1});
  add_integer_option(*compress, "--context", c->context,
                     "Rotary checkpoints: the objective averages the query-key offsets of a "
                     "causal sequence this long",
                     index_t{1});
  add_integer_option(*compress, "--heads", c->heads,
                     "Attention heads (default: num_attention_heads or n_heads from the "
                     "config.json beside the checkpoint, which must agree when both are given)",
                     index_t{1});
  add_integer_option(*compress, "--max-iters", c->max_iters, "ALS iterations per layer");
  compress->add_option("--tol", c->tol, "Stop when the error changes by less than this")
      ->capture_default_str();
  compress->add_option("--init", c->init, "Start: structured, heads, nvecs or random")
      ->check(CLI::IsMember({"structured", "heads", "nvecs", "random"}))
      ->capture_default_str();
  add_integer_option(*compress, "--seed", c->seed, "Seed for --init random");
  CLI::Option* dtype = compress
                           ->add_option("--dtype", c->dtype,
                                        "Compute and write the new tensors in float32 or float64")
                           ->check(CLI::IsMember({"float32", "float64"}))
                           ->capture_default_str();
  compress->add_flag("--float64", c->float64, "Deprecated: the same as --dtype float64")
      ->excludes(dtype);
  compress->add_option("-o,--out", c->out, "Output checkpoint (.safetensors)")->required();
  compress->add_option("--report", c->report, "Also write a JSON report here");
  compress->add_flag("-q,--quiet", c->quiet, "Print no per-layer progress on stderr");
  add_backend_option(*compress, c->backend);
  CLI::Option* calibration = compress->add_option(
      "--calibration", c->calibration,
      "Calibration statistics (.safetensors with <P>input_moment per layer): fit the logits "
      "on the inputs they describe instead of the weights");
  compress
      ->add_option("--damping", c->damping,
                   "With --calibration: each moment S becomes S + damping tr(S)/D I (rotary "
                   "checkpoints: default 0.01)")
      ->needs(calibration)
      ->capture_default_str();

  auto an = std::make_shared<AnalyzeArgs>();
  CLI::App* analyze =
      cmd->add_subcommand("analyze",
                          "Per layer, the dimensions that hold 90/95/99 % of the energy of "
                          "P = [P_1 | ... | P_H] (P_h = W_Q^h W_K^h^T), of W_Q and of W_K");
  analyze->add_option("input", an->input, "Checkpoint (.safetensors)")->required();
  add_integer_option(*analyze, "--heads", an->heads,
                     "Attention heads (default: from config.json, which must agree)", index_t{1});
  analyze->add_flag("--json", an->json, "Print JSON with the full curves");

  return {cmd,
          [c, an, compress] {
            if (!compress->parsed()) return run_analyze(*an);
            for (const CLI::Option* opt : compress->get_options())
              if (opt->count() > 0) c->given.push_back(opt->get_name());
            return run_compress(*c);
          },
          {{"rank", "--shared-dim"}, {"values", "--value-dim"}}};
}

}  // namespace tenfold::cli
