// Tenfold side of the TensorLy comparison (bench/compare/compare.sh). One
// measurement per process, so that the peak resident memory is the case's own:
//   tenfold_compare_driver version --dtype float64
//   tenfold_compare_driver gemm --dtype float64 --size 4000
//   tenfold_compare_driver cp --dtype float64 --tensor x.npy --init u0.npy,u1.npy,u2.npy --iters 10
//                         [--compress off|auto|on]   (default off: plain ALS, as TensorLy's)
//   tenfold_compare_driver cp_default --dtype float64 --tensor x.npy --rank 64
//                         (every default of cp_als: start, compression, tol, max_iters)
//   tenfold_compare_driver tucker --dtype float64 --tensor x.npy --method sthosvd|hosvd|hooi
//                         --ranks 20,20,20 --iters 10
//   tenfold_compare_driver attention --dtype float64 --query wq.npy --key wk.npy --heads 12
//                         --rank 384 --iters 3 [--seed 1] [--model-out DIR]
// (cp, tucker and attention also take --gemm-size N: the square GEMM rate, measured first)
// Prints one JSON line: times (with the per-phase timers), the final relative
// error, the resident memory right after loading the input and the peak after it.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gemm_rate.hpp"
#include "tenfold/attention.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"

namespace {

using tenfold::index_t;
using Json = nlohmann::json;
using Args = std::map<std::string, std::string>;

// --key value pairs after the command name.
Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) {
      throw tenfold::InvalidArgument("expected --key value, got '" + key + "'");
    }
    a[key.substr(2)] = argv[++i];
  }
  return a;
}

const std::string& need(const Args& a, const std::string& key) {
  const auto it = a.find(key);
  if (it == a.end()) throw tenfold::InvalidArgument("missing --" + key);
  return it->second;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

// A field of /proc/self/status in KiB: VmRSS (resident now) or VmHWM (peak).
long status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// Starts peak tracking afresh (Linux resets VmHWM on "5" in clear_refs), so that the
// peak is the computation's, not the loader's. (getrusage's ru_maxrss is no use here:
// it keeps the parent's peak across fork and exec.) Returns false if refused.
bool reset_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// Resident memory right after the input is loaded, then the peak of the computation
// that follows: the peak is reset on construction and read by stop().
class MemoryProbe {
 public:
  MemoryProbe() : loaded_kib_(status_kib("VmRSS")), reset_(reset_peak()) {}
  void stop() { peak_kib_ = status_kib("VmHWM"); }
  Json json() const {
    return {{"rss_loaded_kib", loaded_kib_}, {"peak_rss_kib", peak_kib_}, {"peak_reset", reset_}};
  }

 private:
  long loaded_kib_;
  bool reset_;
  long peak_kib_ = -1;
};

template <class T>
tenfold::Matrix<T> load_matrix(const std::string& path) {
  tenfold::io::NpyHeader h;
  tenfold::Tensor<T> t = tenfold::io::load_npy<T>(path, &h);
  if (t.order() != 2 || !h.fortran_order) {
    throw tenfold::InvalidArgument("'" + path + "' is not a Fortran-order matrix");
  }
  return tenfold::Matrix<T>(t.dim(0), t.dim(1), std::move(t.values()));
}

// Before the input is loaded: the BLAS threads come up and every thread's BLAS work
// buffers are touched in full (a tall, a wide and a square product), so that they count
// in the baseline, as the library's fixed cost, and not as the algorithm's memory. Then
// the square GEMM rate of --gemm-size (if given) is measured, right before the case.
template <class T>
Json warm_up(const Args& a) {
  tenfold::bench::gemm_gflops<T>(16384, 64, 512, 0);
  tenfold::bench::gemm_gflops<T>(64, 32768, 512, 0);
  tenfold::bench::gemm_gflops<T>(1024, 1024, 1024, 0);
  if (!a.count("gemm-size")) return nullptr;
  const index_t n = std::stoll(a.at("gemm-size"));
  return tenfold::bench::gemm_gflops<T>(n, n, n, 2);
}

template <class T>
Json run_gemm(const Args& a) {
  const index_t n = std::stoll(need(a, "size"));
  const int reps = a.count("reps") ? std::stoi(a.at("reps")) : 3;
  return {{"gflops", tenfold::bench::gemm_gflops<T>(n, n, n, reps)}, {"size", n}};
}

// ||X - M|| / ||X|| from <X, M> and ||M|| (independent of the algorithm's own error);
// M is a CP or a Tucker model.
template <class T, class Model>
double relative_error(const tenfold::Tensor<T>& x, const Model& m) {
  const double nx = tenfold::norm(x.view());
  const double r2 = nx * nx - 2.0 * m.inner(x.view()) + std::pow(m.norm(), 2);
  return std::sqrt(std::max(0.0, r2)) / nx;
}

// What every case reports: sweeps, seconds in total and per phase, the error, the
// input's size, the GEMM rate of warm_up and the memory probe's readings.
Json case_result(int iters, double seconds, Json phases, double rel_error, index_t input_bytes,
                 const Json& gemm, const MemoryProbe& memory) {
  Json out = {{"iters", iters},         {"seconds_total", seconds},   {"phases", std::move(phases)},
              {"rel_error", rel_error}, {"input_bytes", input_bytes}, {"gemm_gflops", gemm}};
  out.update(memory.json());
  return out;
}

// case_result of a decomposition of the dense tensor x, with the error measured here.
template <class T, class Result>
Json tensor_case_result(const tenfold::Tensor<T>& x, const Result& res, Json phases,
                        const Json& gemm, const MemoryProbe& memory) {
  return case_result(res.iterations, res.timings.total, std::move(phases),
                     relative_error(x, res.model), x.numel() * static_cast<index_t>(sizeof(T)),
                     gemm, memory);
}

// tensor_case_result of a CP-ALS run, with its phase timers.
template <class T>
Json cp_case_result(const tenfold::Tensor<T>& x, const tenfold::CpResult<T>& res, const Json& gemm,
                    const MemoryProbe& memory) {
  const tenfold::CpTimings& t = res.timings;
  Json out = tensor_case_result(
      x, res, {{"mttkrp", t.mttkrp}, {"gram", t.gram}, {"solve", t.solve}, {"other", t.other}},
      gemm, memory);
  out["seconds_init"] = t.init;
  out["rel_error_als"] = res.relative_error;
  return out;
}

template <class T>
Json run_cp(const Args& a) {
  const Json gemm = warm_up<T>(a);
  // The tensor and factors are Fortran-order files: mode n is NumPy axis n.
  const tenfold::Tensor<T> x = tenfold::io::load_npy<T>(need(a, "tensor"));
  std::vector<tenfold::Matrix<T>> start;
  for (const std::string& f : split(need(a, "init"))) start.push_back(load_matrix<T>(f));
  tenfold::CpOptions o;
  o.init = tenfold::CpInit::given;
  o.rank = start.at(0).cols();
  o.max_iters = std::stoi(need(a, "iters"));
  o.tol = 0.0;
  // Plain ALS unless asked: TensorLy's parafac has no compression first.
  o.compress = tenfold::parse_cp_compress(a.count("compress") ? a.at("compress") : "off");
  MemoryProbe memory;

  const tenfold::CpResult<T> res = tenfold::cp_als(x, o, start);
  memory.stop();
  return cp_case_result(x, res, gemm, memory);
}

// cp_als with nothing but the rank set: what a user gets by default.
template <class T>
Json run_cp_default(const Args& a) {
  const Json gemm = warm_up<T>(a);
  const tenfold::Tensor<T> x = tenfold::io::load_npy<T>(need(a, "tensor"));
  tenfold::CpOptions o;
  o.rank = std::stoll(need(a, "rank"));
  MemoryProbe memory;

  const tenfold::CpResult<T> res = tenfold::cp_als(x, o);
  memory.stop();
  Json out = cp_case_result(x, res, gemm, memory);
  out["compressed"] = res.compressed;
  out["stop"] = std::string(tenfold::to_string(res.stop));
  return out;
}

template <class T>
Json run_tucker(const Args& a) {
  const Json gemm = warm_up<T>(a);
  const tenfold::Tensor<T> x = tenfold::io::load_npy<T>(need(a, "tensor"));
  tenfold::TuckerOptions o;
  o.method = tenfold::parse_tucker_method(need(a, "method"));
  for (const std::string& r : split(need(a, "ranks"))) o.ranks.push_back(std::stoll(r));
  o.max_iters = std::max(1, std::stoi(need(a, "iters")));
  o.tol = 0.0;
  MemoryProbe memory;

  const tenfold::TuckerResult<T> res = tenfold::tucker(x, o);
  memory.stop();
  const tenfold::TuckerTimings& t = res.timings;
  Json out =
      tensor_case_result(x, res, {{"gram", t.gram}, {"eig", t.eig}, {"ttm", t.ttm}}, gemm, memory);
  out["rel_error_own"] = res.relative_error;
  return out;
}

// Layer from --query and --key (D x H d Fortran-order files, head h owning columns
// h d .. (h+1) d - 1), compressed to rank --rank by the adapter's ALS from a random
// start (seed --seed) for exactly --iters sweeps; --model-out, if given, receives
// mixing.npy, query.npy, key.npy and reported.json (the adapter's error and context
// scale) for an outside check of the error.
template <class T>
Json run_attention(const Args& a) {
  const Json gemm = warm_up<T>(a);
  tenfold::attention::QueryKeyLayer<T> layer;
  layer.heads = std::stoll(need(a, "heads"));
  layer.query_weight = load_matrix<T>(need(a, "query"));
  layer.key_weight = load_matrix<T>(need(a, "key"));
  layer.head_dim = layer.query_weight.cols() / layer.heads;
  tenfold::attention::CompressOptions o;
  o.rank = std::stoll(need(a, "rank"));
  o.max_iters = std::stoi(need(a, "iters"));
  o.tol = 0.0;
  o.init = tenfold::attention::Init::random;
  o.seed = a.count("seed") ? std::stoull(a.at("seed")) : 0;
  MemoryProbe memory;

  const tenfold::attention::CompressResult<T> res = tenfold::attention::compress(layer, o);
  memory.stop();
  if (a.count("model-out")) {
    // The model, and what the adapter reported for it, side by side for the check.
    const std::filesystem::path dir = a.at("model-out");
    const auto save = [&](const char* name, const tenfold::Matrix<T>& m) {
      tenfold::io::save_npy<T>(dir / name,
                               tenfold::TensorView<const T>(m.data(), {m.rows(), m.cols()}));
    };
    save("mixing.npy", res.layer.mixing);
    save("query.npy", res.layer.query);
    save("key.npy", res.layer.key);
    const Json reported = {{"rel_error", res.relative_error},
                           {"context_scale", res.layer.context_scale}};
    tenfold::io::write_file_atomically(dir / "reported.json",
                                       [&](std::ostream& os) { os << reported.dump(); });
  }
  const index_t weights = layer.query_weight.size() + layer.key_weight.size();
  return case_result(res.iterations, res.seconds, Json::object(), res.relative_error,
                     weights * static_cast<index_t>(sizeof(T)), gemm, memory);
}

template <class T>
Json dispatch(const std::string& command, const Args& a) {
  if (command == "version") return {{"version", TENFOLD_VERSION}};
  if (command == "gemm") return run_gemm<T>(a);
  if (command == "cp") return run_cp<T>(a);
  if (command == "cp_default") return run_cp_default<T>(a);
  if (command == "tucker") return run_tucker<T>(a);
  if (command == "attention") return run_attention<T>(a);
  throw tenfold::InvalidArgument("unknown command '" + command +
                                 "' (expected version, gemm, cp, cp_default, tucker or attention)");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2)
      throw tenfold::InvalidArgument("usage: tenfold_compare_driver COMMAND --key value...");
    const std::string command = argv[1];
    const Args a = parse_args(argc, argv);
    const std::string dtype = need(a, "dtype");
    Json out;
    if (dtype == "float64") {
      out = dispatch<double>(command, a);
    } else if (dtype == "float32") {
      out = dispatch<float>(command, a);
    } else {
      throw tenfold::InvalidArgument("unknown --dtype '" + dtype +
                                     "' (expected float32 or float64)");
    }
    out["side"] = "tenfold";
    out["command"] = command;
    out["dtype"] = dtype;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tenfold_compare_driver: %s\n", e.what());
    return 1;
  }
}
