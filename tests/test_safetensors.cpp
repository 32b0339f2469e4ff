// Tests of the safetensors format: round trips bit for bit, the reference layout,
// every half and bfloat16 value, weight matrices, other dtypes, zero-length tensors,
// damaged files named by their problem, and the writer's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io_test_util.hpp"
#include "same_bits.hpp"
#include "temp_dir.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/safetensors.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;
using tenfold::IoError;
using tenfold::Tensor;
using tenfold::test::bytes_of;
using tenfold::test::Damage;
using tenfold::test::error_of;
using tenfold::test::le_bytes;
using tenfold::test::random_values;
using tenfold::test::read_file;
using tenfold::test::write_file;

namespace {

using tenfold::test::same_bits;

using tenfold::io::SafetensorsFile;
using tenfold::io::SafetensorsTensor;

std::span<const std::byte> span_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// A safetensors file written by hand: header length `n` (default: the header's), the
// header, then the data.
std::string st_file(const std::string& header, const std::string& data,
                    std::optional<std::uint64_t> n = std::nullopt) {
  return le_bytes(n.value_or(header.size()), 8) + header + data;
}

TEST(Safetensors, RoundTripIsBitIdentical) {
  TempDir dir;
  const Tensor<float> a({3, 4}, random_values<float>(12, 1));
  const Tensor<double> b({2, 3, 2}, random_values<double>(12, 2));
  const std::vector<std::int64_t> ids = {1, -2, 3, 1LL << 40, -5};
  const std::string ids_bytes = bytes_of(ids);
  const std::string bf16("\x80\x3f\x00\x40\x40\x40\x80\xbf", 8);  // 1, 2, 3, -1
  const Tensor<float> scalar({}, {4.5f});
  const Tensor<double> empty({4, 0});
  const std::vector<SafetensorsTensor> tensors = {
      tenfold::io::safetensors_tensor<float>("a", a),
      tenfold::io::safetensors_tensor<double>("b.weight", b),
      {"ids", "I64", {5}, span_of(ids_bytes)},
      {"half", "BF16", {2, 2}, span_of(bf16)},
      tenfold::io::safetensors_tensor<float>("scalar", scalar),
      tenfold::io::safetensors_tensor<double>("empty", empty),
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "é"}};
  tenfold::io::save_safetensors(dir / "m.safetensors", tensors, metadata);

  const SafetensorsFile f(dir / "m.safetensors");
  EXPECT_EQ(f.metadata(), metadata);
  ASSERT_EQ(f.tensors().size(), tensors.size());
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& e = f.tensors()[i];
    EXPECT_EQ(e.name, tensors[i].name);
    EXPECT_EQ(e.dtype, tensors[i].dtype);
    EXPECT_EQ(e.shape, tensors[i].shape);
    EXPECT_EQ(e.begin, offset);
    offset += tensors[i].bytes.size();
    EXPECT_EQ(e.end, offset);
    const std::vector<std::byte> raw = f.read_bytes(e.name);
    EXPECT_TRUE(
        std::equal(raw.begin(), raw.end(), tensors[i].bytes.begin(), tensors[i].bytes.end()))
        << e.name;
  }
  EXPECT_EQ(f.tensors()[0].shape, (std::vector<index_t>{4, 3}));
  const Tensor<float> a2 = f.read<float>("a");
  EXPECT_EQ(a2.dims(), a.dims());
  EXPECT_TRUE(same_bits(a2.values(), a.values()));
  const Tensor<double> b2 = f.read<double>("b.weight");
  EXPECT_EQ(b2.dims(), b.dims());
  EXPECT_TRUE(same_bits(b2.values(), b.values()));
  EXPECT_EQ(f.read<double>("scalar").values(), std::vector<double>{4.5});
  EXPECT_EQ(f.read<double>("empty").dims(), empty.dims());
  EXPECT_EQ(f.read<float>("half").values(), (std::vector<float>{1, 2, 3, -1}));

  // Pass-through copy of every tensor as raw bytes gives the same file.
  std::vector<std::vector<std::byte>> raws;
  for (const auto& e : f.tensors()) raws.push_back(f.read_bytes(e.name));
  std::vector<SafetensorsTensor> copy;
  for (std::size_t i = 0; i < raws.size(); ++i) {
    const auto& e = f.tensors()[i];
    copy.push_back({e.name, e.dtype, e.shape, raws[i]});
  }
  tenfold::io::save_safetensors(dir / "copy.safetensors", copy, f.metadata());
  EXPECT_EQ(read_file(dir / "copy.safetensors"), read_file(dir / "m.safetensors"));
}

TEST(Safetensors, WritesTheReferenceLayout) {
  TempDir dir;
  const Tensor<float> w({2}, {1.0f, 2.0f});
  const std::vector<SafetensorsTensor> t = {tenfold::io::safetensors_tensor<float>("w", w)};
  tenfold::io::save_safetensors(dir / "w.safetensors", t, {{"format", "pt"}});
  std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(read_file(dir / "w.safetensors"),
            st_file(header, bytes_of(std::vector<float>{1.0f, 2.0f})));
}

// Independent references: value = (-1)^s * significand * 2^exponent from the fields.
double reference_f16(std::uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double magnitude = e == 0    ? std::ldexp(m, -24)
                           : e == 31 ? (m ? NAN : INFINITY)
                                     : std::ldexp(1024 + m, e - 25);
  return (h >> 15) ? -magnitude : magnitude;
}

double reference_bf16(std::uint16_t h) {
  const int e = (h >> 7) & 255, m = h & 127;
  const double magnitude = e == 0     ? std::ldexp(m, -133)
                           : e == 255 ? (m ? NAN : INFINITY)
                                      : std::ldexp(128 + m, e - 134);
  return (h >> 15) ? -magnitude : magnitude;
}

TEST(Safetensors, ConvertsEveryHalfAndBfloat16Value) {
  TempDir dir;
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  const std::string bytes = bytes_of(all);
  const std::vector<SafetensorsTensor> t = {{"h", "F16", {256, 256}, span_of(bytes)},
                                            {"b", "BF16", {65536}, span_of(bytes)}};
  tenfold::io::save_safetensors(dir / "h.safetensors", t);
  const SafetensorsFile f(dir / "h.safetensors");
  for (const auto& [name, reference] :
       {std::pair{"h", &reference_f16}, std::pair{"b", &reference_bf16}}) {
    const Tensor<float> xf = f.read<float>(name);
    const Tensor<double> xd = f.read<double>(name);
    int mismatches = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const double ref = reference(all[i]);
      const double got_f = xf.values()[i], got_d = xd.values()[i];
      const bool ok =
          std::isnan(ref)
              ? (std::isnan(got_f) && std::isnan(got_d) && std::signbit(got_f) == std::signbit(ref))
              : (got_f == ref && got_d == ref && std::signbit(got_f) == std::signbit(ref));
      if (!ok && ++mismatches < 5) ADD_FAILURE() << name << " bits " << all[i] << ": " << got_f;
    }
    EXPECT_EQ(mismatches, 0) << name;
  }
}

TEST(Safetensors, WeightMatrixReadsAsItsTranspose) {
  TempDir dir;
  // A (out = 3, in = 4) weight W[o][i] = 10 o + i, row-major.
  std::vector<double> w;
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 4; ++i) w.push_back(10.0 * o + i);
  const std::string bytes = bytes_of(w);
  const std::vector<SafetensorsTensor> t = {{"w", "F64", {3, 4}, span_of(bytes)},
                                            {"v", "F64", {12}, span_of(bytes)}};
  tenfold::io::save_safetensors(dir / "w.safetensors", t);
  const SafetensorsFile f(dir / "w.safetensors");
  const tenfold::Matrix<float> m = f.read_matrix<float>("w");
  ASSERT_EQ(m.rows(), 4);
  ASSERT_EQ(m.cols(), 3);
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(m(i, o), 10.0f * o + i);
  const std::string e = error_of<IoError>([&] { f.read_matrix<double>("v"); });
  EXPECT_NE(e.find("tensor 'v' of shape (12) is not a matrix"), std::string::npos) << e;

  // Writing the in x out matrix back gives the (out, in) weight, byte for byte.
  const tenfold::Matrix<double> wt = f.read_matrix<double>("w");
  const std::vector<SafetensorsTensor> back = {tenfold::io::safetensors_tensor<double>(
      "w", tenfold::TensorView<const double>(wt.data(), {wt.rows(), wt.cols()}))};
  tenfold::io::save_safetensors(dir / "back.safetensors", back);
  const SafetensorsFile g(dir / "back.safetensors");
  EXPECT_EQ(g.at("w").shape, (std::vector<index_t>{3, 4}));
  const std::vector<std::byte> raw = g.read_bytes("w");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(raw.data()), raw.size()), bytes);
}

TEST(Safetensors, OtherDtypesAreListedAndCopiedButNotReadAsFloats) {
  TempDir dir;
  const std::string bytes("\x01\x00\x01\x01", 4);
  const std::vector<SafetensorsTensor> t = {{"mask", "BOOL", {4}, span_of(bytes)},
                                            {"ids", "I16", {2}, span_of(bytes)}};
  tenfold::io::save_safetensors(dir / "o.safetensors", t);
  const SafetensorsFile f(dir / "o.safetensors");
  EXPECT_EQ(f.at("mask").dtype, "BOOL");
  EXPECT_EQ(f.read_bytes("ids").size(), 4u);
  const std::string m = error_of<IoError>([&] { f.read<float>("ids"); });
  EXPECT_NE(m.find("'ids' has dtype I16, which is not floating point"), std::string::npos) << m;
  EXPECT_EQ(f.find("nope"), nullptr);
  const std::string n = error_of<IoError>([&] { f.read_bytes("nope"); });
  EXPECT_NE(n.find("no tensor named 'nope'"), std::string::npos) << n;
}

TEST(Safetensors, ZeroLengthTensorsMayShareOffsets) {
  TempDir dir;
  write_file(dir / "z.safetensors",
             st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("e":{"dtype":"F64","shape":[0,3],"data_offsets":[4,4]},)"
                     R"("f":{"dtype":"F64","shape":[0],"data_offsets":[8,8]}})",
                     std::string(8, '\0')));
  const SafetensorsFile f(dir / "z.safetensors");
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[1].name, "e");
  EXPECT_EQ(f.read<float>("e").dims(), (std::vector<index_t>{3, 0}));
}

TEST(Safetensors, RejectsDamagedFilesNamingTheProblem) {
  const auto entry = [](const std::string& body) { return R"({"t":{)" + body + "}}"; };
  const std::string f32x2 = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  const std::string data8(8, '\0');
  const std::vector<Damage> cases = {
      {"empty", "", "0 bytes, too few"},
      {"7 bytes", std::string(7, '\0'), "7 bytes, too few"},
      {"header beyond file", st_file("{}", "", 1000), "header length 1000 goes beyond the end"},
      {"huge header length", st_file("{}", "", 200000000), "exceeds the limit"},
      {"max header length", st_file("{}", "", ~std::uint64_t{0}), "exceeds the limit"},
      {"bad JSON", st_file(R"({"t": )", ""), "not valid JSON"},
      {"invalid UTF-8", st_file("{\"\xff\":1}", ""), "not valid JSON"},
      {"not an object", st_file("[1, 2]", ""), "the header is not a JSON object"},
      {"entry not object", st_file(R"({"t": 5})", ""), "tensor 't' is not a JSON object"},
      {"missing key", st_file(entry(R"("dtype":"F32","shape":[2])"), data8), "lacks one of"},
      {"unknown dtype", st_file(entry(R"("dtype":"Q7","shape":[2],"data_offsets":[0,8])"), data8),
       "unknown dtype 'Q7'"},
      {"dtype not string", st_file(entry(R"("dtype":4,"shape":[2],"data_offsets":[0,8])"), data8),
       "dtype that is not a string"},
      {"negative size", st_file(entry(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), data8),
       "shape entry is not a non-negative integer: -2"},
      {"fractional size",
       st_file(entry(R"("dtype":"F32","shape":[2.5],"data_offsets":[0,8])"), data8),
       "shape entry is not a non-negative integer: 2.5"},
      {"shape not array", st_file(entry(R"("dtype":"F32","shape":2,"data_offsets":[0,8])"), data8),
       "shape that is not an array"},
      {"size beyond int64",
       st_file(entry(R"("dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,8])"), data8),
       "shape entry 18446744073709551615 is too large"},
      {"three offsets",
       st_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,4,8])"), data8),
       "data_offsets is not a pair"},
      {"begin after end",
       st_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[8,0])"), data8),
       "[8, 0] with begin > end"},
      {"size mismatch", st_file(entry(R"("dtype":"F32","shape":[3],"data_offsets":[0,8])"), data8),
       "needs 12 bytes, data_offsets [0, 8] hold 8"},
      {"beyond data", st_file(entry(f32x2), "1234"), "[0, 8] beyond the data section (4 bytes)"},
      {"huge offsets",
       st_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615])"), ""),
       "beyond the data section (0 bytes)"},
      {"overlap",
       st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               std::string(12, '\0')),
       "tensors 'a' and 'b' have overlapping data"},
      {"same range twice",
       st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
               data8),
       "overlapping data"},
      {"absurd shape",
       st_file(entry(R"("dtype":"F32","shape":[4611686018427387904,4611686018427387904],)"
                     R"("data_offsets":[0,0])"),
               ""),
       "more elements than"},
      {"data size overflow",
       st_file(entry(R"("dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0])"), ""),
       "data size 4611686018427387904 x 8 overflows 64 bits"},
      {"duplicate name", st_file(R"({"t":{)" + f32x2 + R"(},"t":{)" + f32x2 + "}}", data8),
       "'t' appears twice"},
      {"metadata not object", st_file(R"({"__metadata__":[1]})", ""),
       "__metadata__ is not a JSON object"},
      {"metadata value", st_file(R"({"__metadata__":{"k":1}})", ""),
       "__metadata__ value of 'k' is not a string"},
  };
  TempDir dir;
  for (const Damage& c : cases) {
    const fs::path p = dir / "bad.safetensors";
    write_file(p, c.bytes);
    const std::string m = error_of<IoError>([&] { SafetensorsFile f(p); });
    EXPECT_NE(m.find(c.message), std::string::npos) << c.what << ": " << m;
    EXPECT_NE(m.find(p.string()), std::string::npos) << c.what << ": " << m;
  }
}

TEST(Safetensors, WriterRejectsBadInputAndWritesNothing) {
  TempDir dir;
  const std::string b8(8, '\0');
  const auto save = [&](std::vector<SafetensorsTensor> t,
                        std::map<std::string, std::string> meta = {}) {
    return [&dir, t, meta] { tenfold::io::save_safetensors(dir / "out.safetensors", t, meta); };
  };
  using tenfold::DimensionMismatch;
  using tenfold::InvalidArgument;
  EXPECT_NE(error_of<InvalidArgument>(
                save({{"a", "F32", {2}, span_of(b8)}, {"a", "F32", {2}, span_of(b8)}}))
                .find("'a' appears twice"),
            std::string::npos);
  EXPECT_NE(
      error_of<InvalidArgument>(save({{"__metadata__", "F32", {2}, span_of(b8)}})).find("reserved"),
      std::string::npos);
  EXPECT_NE(
      error_of<InvalidArgument>(save({{"a", "F31", {2}, span_of(b8)}})).find("unknown dtype 'F31'"),
      std::string::npos);
  EXPECT_NE(error_of<DimensionMismatch>(save({{"a", "F64", {2}, span_of(b8)}}))
                .find("needs 16 bytes, got 8"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>(save({{"a", "F32", {-2}, span_of(b8)}})).find("negative"),
            std::string::npos);
  EXPECT_NE(
      error_of<InvalidArgument>(save({{"\xff", "F32", {2}, span_of(b8)}})).find("valid UTF-8"),
      std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>(save({}, {{"k", "\xc3"}})).find("valid UTF-8"),
            std::string::npos);
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
