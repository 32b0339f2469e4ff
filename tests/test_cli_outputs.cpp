// The `tenfold` program's outputs and limits, run as a subprocess: outputs checked
// before any work, result folders whole, ranks and memory refused up front, integer
// flags with range errors, messages in NumPy axes and tensor names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "temp_dir.hpp"
#include "tenfold/backend.hpp"
#include "tenfold/io.hpp"
#include "tenfold/safetensors.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;

namespace {

// Deterministic values in [-0.5, 0.5).
std::vector<double> values(index_t n, std::uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<double>(seed >> 11) * 0x1.0p-53 - 0.5;
  }
  return v;
}

// Writes a C-order .npy array of NumPy shape `shape` (the column-major tensor of the
// reversed shape); `numpy_at` sets entries by NumPy index before writing.
fs::path write_npy(const fs::path& p, std::vector<index_t> shape,
                   const std::vector<std::pair<std::vector<index_t>, double>>& numpy_at = {}) {
  std::vector<index_t> dims(shape.rbegin(), shape.rend());
  tenfold::Tensor<double> x(dims, values(tenfold::checked_numel(dims), 7));
  for (const auto& [index, v] : numpy_at) {
    // C order: the last NumPy axis is the fastest.
    index_t offset = 0;
    for (std::size_t a = 0; a < shape.size(); ++a) offset = offset * shape[a] + index[a];
    x[offset] = v;
  }
  tenfold::io::save_npy<double>(p, x.view(), tenfold::io::NpyOrder::c_reversed);
  return p;
}

// A BERT-named checkpoint with `layers` layers of H = 2 heads of width 4 over D = 8,
// each query/key weight stored (out x in) = (8, 8) row-major; `nan_at` puts a NaN
// into layer 0's key weight at that (row, column) of the file.
fs::path write_checkpoint(const fs::path& p, int layers, std::vector<index_t> nan_at = {},
                          const std::string& layer_index = "") {
  std::vector<std::vector<float>> data;
  std::vector<tenfold::io::SafetensorsTensor> tensors;
  data.reserve(static_cast<std::size_t>(3 * layers));
  for (int l = 0; l < layers; ++l) {
    const std::string p0 = "bert.encoder.layer." +
                           (layer_index.empty() ? std::to_string(l) : layer_index) +
                           ".attention.self.";
    for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<index_t>>>{
             {"query.weight", {8, 8}}, {"query.bias", {8}}, {"key.weight", {8, 8}}}) {
      const std::vector<double> v = values(tenfold::checked_numel(shape), 11 + data.size());
      data.emplace_back(v.begin(), v.end());
      if (l == 0 && name == "key.weight" && !nan_at.empty())
        data.back()[static_cast<std::size_t>(nan_at[0] * 8 + nan_at[1])] = std::nanf("");
      tensors.push_back(
          {p0 + name, "F32", shape, std::as_bytes(std::span<const float>(data.back()))});
    }
  }
  tenfold::io::save_safetensors(p, tensors, {{"format", "pt"}});
  return p;
}

std::string s(const fs::path& p) { return p.string(); }

}  // namespace

// Item: two outputs of one command that are the same file are refused before any work.
TEST(CliOutputs, ReportAndOutTheSameFileAreRefused) {
  TempDir dir;
  const std::string m = s(write_checkpoint(dir / "m.safetensors", 2));
  const std::string common = "attention compress " + m + " --heads 2 --shared-dim 3 ";
  // Same path: nothing is computed (no progress line), nothing is written.
  CliRun r =
      tenfold_cli(dir, common + "--out " + s(dir / "same.st") + " --report " + s(dir / "same.st"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find("--out and --report name the same file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "same.st"));

  // Through a symlink and through a hard link to an earlier output.
  ASSERT_EQ(tenfold_cli(dir, common + "-q --out " + s(dir / "same.st")).code, 0);
  const std::string before = slurp(dir / "same.st");
  fs::create_symlink(dir / "same.st", dir / "link.st");
  fs::create_hard_link(dir / "same.st", dir / "hard.st");
  for (const char* other : {"link.st", "hard.st"}) {
    r = tenfold_cli(dir, common + "--out " + s(dir / "same.st") + " --report " + s(dir / other));
    EXPECT_EQ(r.code, 1) << other;
    EXPECT_NE(r.err.find("name the same file"), std::string::npos) << r.err;
    EXPECT_EQ(slurp(dir / "same.st"), before) << other;
  }
  // A symlink whose target does not exist yet names that target.
  fs::create_symlink(dir / "later.st", dir / "dangling.st");
  r = tenfold_cli(dir,
                  common + "--out " + s(dir / "later.st") + " --report " + s(dir / "dangling.st"));
  EXPECT_EQ(r.code, 1);
  EXPECT_FALSE(fs::exists(dir / "later.st"));

  // --report may not be the input either.
  const std::string input = slurp(m);
  r = tenfold_cli(dir, common + "--out " + s(dir / "o.st") + " --report " + m);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is the input file"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(m), input);
  EXPECT_FALSE(fs::exists(dir / "o.st"));
}

// Item: a result folder is whole; a new result never sits beside files of an older run.
TEST(CliOutputs, ResultFolderIsReplacedWhole) {
  TempDir dir;
  const std::string x8 = s(write_npy(dir / "x8.npy", {2, 2, 2, 2, 2, 2, 2, 2}));
  const std::string x3 = s(write_npy(dir / "x3.npy", {5, 4, 3}));
  const std::string out = s(dir / "res");
  ASSERT_EQ(tenfold_cli(dir, "cp " + x8 + " --rank 2 -q --out " + out).code, 0);
  EXPECT_TRUE(fs::exists(dir / "res/factor_7.npy"));
  // A temporary file an interrupted writer of an older version left behind.
  std::ofstream(dir / "res/.factor_1.npy.tmp.99999.0") << "partial";

  const CliRun r = tenfold_cli(dir, "cp " + x3 + " --rank 2 -q --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "res")) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"factor_0.npy", "factor_1.npy", "factor_2.npy",
                                             "report.json", "weights.npy"}));
  const auto report = nlohmann::json::parse(slurp(dir / "res/report.json"));
  EXPECT_EQ(report["shape"], (std::vector<index_t>{5, 4, 3}));
  // No temporary sibling is left beside the folder.
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".res."), std::string::npos) << e.path();

  // Tucker into the same folder: the CP files go, the Tucker set comes.
  ASSERT_EQ(tenfold_cli(dir, "tucker " + x3 + " --ranks 2,2,2 -q --out " + out).code, 0);
  EXPECT_FALSE(fs::exists(dir / "res/weights.npy"));
  EXPECT_TRUE(fs::exists(dir / "res/core.npy"));

  // A folder holding anything else is not a result: refused, left as it is.
  std::ofstream(dir / "res/notes.txt") << "mine";
  const CliRun refused = tenfold_cli(dir, "cp " + x3 + " --rank 2 -q --out " + out);
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("notes.txt"), std::string::npos) << refused.err;
  EXPECT_EQ(slurp(dir / "res/notes.txt"), "mine");
  EXPECT_TRUE(fs::exists(dir / "res/core.npy"));

  // An input inside the output folder would be replaced with it: refused.
  fs::create_directories(dir / "d");
  fs::copy_file(x3, dir / "d/factor_0.npy");
  const CliRun inside =
      tenfold_cli(dir, "cp " + s(dir / "d/factor_0.npy") + " --rank 2 -q --out " + s(dir / "d"));
  EXPECT_EQ(inside.code, 1);
  EXPECT_NE(inside.err.find("is the input file"), std::string::npos) << inside.err;
  EXPECT_EQ(slurp(dir / "d/factor_0.npy"), slurp(x3));
}

// Item: outputs that cannot be created are found before the work starts.
TEST(CliOutputs, OutputsThatCannotBeWrittenAreFoundFirst) {
  TempDir dir;
  const std::string m = s(write_checkpoint(dir / "m.safetensors", 2));
  fs::create_directories(dir / "folder");
  // Without -q each finished layer prints a line: an error after the work shows them.
  for (const std::string& args : {"--out " + s(dir / "folder"),
                                  "--out " + s(dir / "o.st") + " --report " + s(dir / "folder")}) {
    const CliRun r =
        tenfold_cli(dir, "attention compress " + m + " --heads 2 --shared-dim 3 " + args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_NE(r.err.find("is a folder"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "o.st"));
  }
  // A path below a regular file can never be created.
  const std::string x = s(write_npy(dir / "x.npy", {5, 4, 3}));
  for (const std::string& cmd : {"cp " + x + " --rank 2", "tucker " + x + " --ranks 2,2,2"}) {
    const CliRun r = tenfold_cli(dir, cmd + " --out " + s(dir / "x.npy/sub"));
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find("is not a folder"), std::string::npos) << r.err;
  }
  // A folder this user may not write in (root may write anywhere).
  if (::geteuid() != 0) {
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    const CliRun r = tenfold_cli(dir, "cp " + x + " --rank 2 --out " + s(dir / "ro/out"));
    fs::permissions(dir / "ro", fs::perms::owner_all);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("no permission"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("iter"), std::string::npos) << r.err;
  }
}

// Item: ranks above what any tensor of the shape can have, numbers out of range,
// and requests that cannot fit in memory are refused at once.
TEST(CliOutputs, RanksAndMemoryAreBoundedUpFront) {
  TempDir dir;
  const std::string x = s(write_npy(dir / "x.npy", {10, 8, 6}));
  const std::string out = " -q --out " + s(dir / "o");
  struct Case {
    std::string args;
    int code;
    std::vector<std::string> message;
  };
  const std::string m = s(write_checkpoint(dir / "m.safetensors", 1));
  const std::vector<Case> cases = {
      {"cp " + x + " --rank 5000", 1, {"--rank 5000 exceeds 48", "(10, 8, 6)"}},
      {"cp " + x + " --rank 49", 1, {"exceeds 48"}},
      {"cp " + x + " --rank 1000000000", 1, {"exceeds 48"}},
      {"cp " + x + " --rank 99999999999999999999", 2, {"--rank", "out of range"}},
      {"cp " + x + " --rank 1e3", 2, {"--rank", "not an integer"}},
      {"cp " + x + " --rank 2 --max-iters 99999999999", 2, {"--max-iters", "out of range"}},
      {"cp " + x + " --rank 2 --seed -1", 2, {"--seed", "out of range"}},
      {"tucker " + x + " --ranks 99999999999999999999,1,1", 2, {"--ranks", "out of range"}},
      {"attention compress " + m + " --heads 2 --shared-dim 99999999999999999999",
       2,
       {"--shared-dim", "out of range"}},
      {"attention compress " + m + " --heads 99999999999999999999 --shared-dim 2",
       2,
       {"--heads", "out of range"}},
  };
  for (const Case& c : cases) {
    const CliRun r = tenfold_cli(dir, c.args + out);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << c.args << "\n" << r.err;
    for (const std::string& part : c.message)
      EXPECT_NE(r.err.find(part), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "o")) << c.args;
  }
  // The largest rank still runs.
  EXPECT_EQ(tenfold_cli(dir, "cp " + x + " --rank 48 --max-iters 2" + out).code, 0);

  // Tucker: a rank above the product of the other sizes (10 x 2 x 2: at most 4 on axis 0).
  const std::string flat = s(write_npy(dir / "flat.npy", {10, 2, 2}));
  const CliRun t = tenfold_cli(dir, "tucker " + flat + " --ranks 5,2,2 -q --out " + s(dir / "t"));
  EXPECT_EQ(t.code, 1);
  EXPECT_NE(t.err.find("rank 5 of axis 0 is outside [1, 4]"), std::string::npos) << t.err;

  // A 2.5 MB input whose axis-0 Gram (nvecs start, Tucker) needs about 600 GB: refused
  // with the estimate and what is available, before allocating it.
  const std::string tall = s(write_npy(dir / "tall.npy", {160000, 2, 1}));
  for (const std::string& cmd :
       {"cp " + tall + " --rank 1 --init nvecs", "tucker " + tall + " --ranks 2,2,1"}) {
    const CliRun r = tenfold_cli(dir, cmd + " -q --out " + s(dir / "big"));
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    for (const char* part : {"needs about", "GiB", "bytes", "available"})
      EXPECT_NE(r.err.find(part), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "big"));
  }
}

// Item: messages speak NumPy axes, file names and the file's own index order.
TEST(CliOutputs, MessagesUseNumPyAxesAndTensorNames) {
  TempDir dir;
  const std::string x = s(write_npy(dir / "x.npy", {10, 8, 6}));
  const std::string out = " -q --out " + s(dir / "o");
  fs::create_directories(dir / "wrong");
  write_npy(dir / "wrong/factor_0.npy", {12, 3});
  write_npy(dir / "wrong/factor_1.npy", {8, 3});
  write_npy(dir / "wrong/factor_2.npy", {6, 3});
  fs::create_directories(dir / "nan");
  write_npy(dir / "nan/factor_0.npy", {10, 3}, {{{3, 1}, std::nan("")}});
  write_npy(dir / "nan/factor_1.npy", {8, 3});
  write_npy(dir / "nan/factor_2.npy", {6, 3});
  write_npy(dir / "empty.npy", {3, 0, 4});
  write_checkpoint(dir / "nan.safetensors", 2, {3, 5});
  write_checkpoint(dir / "huge.safetensors", 1, {}, "99999999999");
  struct Case {
    std::string args;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {"cp " + x + " --rank 3 --init-factors " + s(dir / "wrong"),
       {"factor_0.npy' has shape (12, 3), expected (10, 3)", "axis 0"}},
      {"cp " + x + " --rank 3 --init-factors " + s(dir / "nan"),
       {"factor_0.npy' has a non-finite entry (NaN) at NumPy index [3, 1]"}},
      {"cp " + s(dir / "empty.npy") + " --rank 1", {"shape (3, 0, 4) is empty (axis 1"}},
      {"tucker " + s(dir / "empty.npy") + " --ranks 1,1,1", {"shape (3, 0, 4) is empty (axis 1"}},
      {"tucker " + x + " --tol 0", {"--tol must be in (0, 1), got 0"}},
      {"attention compress " + s(dir / "nan.safetensors") + " --heads 2 --shared-dim 3",
       {"'bert.encoder.layer.0.attention.self.key.weight' has a non-finite entry (NaN) at index "
        "[3, 5]"}},
      {"attention compress " + s(dir / "huge.safetensors") + " --heads 2 --shared-dim 3",
       {"layer index 99999999999", "too large"}},
  };
  for (const Case& c : cases) {
    const CliRun r = tenfold_cli(dir, c.args + out);
    EXPECT_EQ(r.code, 1) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << c.args << "\n" << r.err;
    for (const std::string& part : c.message)
      EXPECT_NE(r.err.find(part), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find("mode"), std::string::npos) << c.args << "\n" << r.err;
  }
}

// Item: --heads against config.json, and a shared dimension that makes the model larger.
TEST(CliOutputs, HeadsMustAgreeWithConfigAndGrowthIsReported) {
  TempDir dir;
  const std::string m = s(write_checkpoint(dir / "m.safetensors", 2));
  std::ofstream(dir / "config.json") << R"({"num_attention_heads": 4})";
  for (const std::string& cmd :
       {"attention compress " + m + " --shared-dim 3 --out " + s(dir / "o.st"),
        "attention analyze " + m}) {
    const CliRun r = tenfold_cli(dir, cmd + " --heads 2");
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find("heads = 2 disagrees with the 4 attention heads"), std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "o.st"));
  std::ofstream(dir / "config.json") << R"({"num_attention_heads": 2})";
  ASSERT_EQ(tenfold_cli(dir, "attention compress " + m + " --heads 2 --shared-dim 3 -q --out " +
                                 s(dir / "o.st"))
                .code,
            0);

  // R = H d (the exact form) has more parameters than the input: said on stderr and
  // recorded in the report; a compressing R says nothing.
  const std::string report = s(dir / "r.json");
  CliRun r = tenfold_cli(dir, "attention compress " + m + " --shared-dim 8 -q --out " +
                                  s(dir / "full.st") + " --report " + report);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --shared-dim 8 makes the query/key side larger"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(nlohmann::json::parse(slurp(report))["larger_than_input"].get<bool>());
  r = tenfold_cli(dir, "attention compress " + m + " --shared-dim 3 -q --out " +
                           s(dir / "small.st") + " --report " + report);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(nlohmann::json::parse(slurp(report))["larger_than_input"].get<bool>());
}

// Item: nothing is written for an input that fails validation; a missing option is a
// usage error (exit 2).
TEST(CliOutputs, FailedValidationWritesNothing) {
  TempDir dir;
  const std::string x = s(write_npy(dir / "x.npy", {5, 4, 3}));
  std::vector<std::string> failing = {"cp " + x + " --rank 0", "cp " + x + " --rank 2 --tol -1",
                                      "tucker " + x + " --ranks 0,1,1"};
  if (!tenfold::cuda_available()) failing.push_back("cp " + x + " --rank 2 --backend cuda");
  for (const std::string& cmd : failing) {
    const CliRun r = tenfold_cli(dir, cmd + " -q --out " + s(dir / "a/b"));
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "a")) << cmd;
  }
  const CliRun usage = tenfold_cli(dir, "tucker " + x + " --out " + s(dir / "a"));
  EXPECT_EQ(usage.code, 2) << usage.err;
  EXPECT_NE(usage.err.find("--ranks or --tol"), std::string::npos) << usage.err;
  EXPECT_FALSE(fs::exists(dir / "a"));
}

// Item: outputs are written after the work, all of them or none, their folders created
// then; an output where nothing can be created is refused before the work.
TEST(CliOutputs, OutputsInNewFoldersAreWrittenTogetherAfterTheWork) {
  TempDir dir;
  const std::string m = s(write_checkpoint(dir / "m.safetensors", 2));
  const std::string common = "attention compress " + m + " --heads 2 --shared-dim 3 -q ";
  ASSERT_EQ(tenfold_cli(dir, common + "--out " + s(dir / "keep.st")).code, 0);
  const std::string before = slurp(dir / "keep.st");
  // It used to replace keep.st, then fail on the report's missing folder.
  CliRun r = tenfold_cli(dir, common + "--dtype float64 --out " + s(dir / "keep.st") +
                                  " --report " + s(dir / "newdir" / "sub" / "r.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(dir / "keep.st"), before);  // float64 tensors now
  const auto report = nlohmann::json::parse(slurp(dir / "newdir" / "sub" / "r.json"));
  EXPECT_EQ(report["dtype"], "float64");  // it said float32
  r = tenfold_cli(dir, common + "--out " + s(dir / "nd" / "sub" / "o.st"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "nd" / "sub" / "o.st"));
  for (const auto& e : fs::recursive_directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
  // /proc refuses a new file even to root.
  r = tenfold_cli(dir, common + "--out /proc/tenfold-test.st");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find("cannot create --out '/proc/tenfold-test.st'"), std::string::npos) << r.err;
}
