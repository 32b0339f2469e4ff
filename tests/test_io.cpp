// Tests of the file formats: .npy, safetensors and atomic file replacement.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "same_bits.hpp"
#include "temp_dir.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/safetensors.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;
using tenfold::IoError;
using tenfold::Tensor;
using tenfold::io::DType;
using tenfold::io::NpyHeader;

namespace {

// A fresh folder for one test, removed afterwards.

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string le_bytes(std::uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A .npy file written by hand: magic, version, header length, `dict` (padded with
// spaces and '\n' to a multiple of 64 bytes when `pad`), then `data`.
std::string npy_file(int version, std::string dict, const std::string& data, bool pad = true) {
  const std::size_t prelude = version == 1 ? 10 : 12;
  if (pad) {
    while ((prelude + dict.size() + 1) % 64 != 0) dict += ' ';
    dict += '\n';
  }
  return std::string("\x93NUMPY") + static_cast<char>(version) + '\0' +
         le_bytes(dict.size(), version == 1 ? 2 : 4) + dict + data;
}

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist;
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(gen));
  return v;
}

// Message of the E thrown by f (the test fails when f throws nothing or something else).
template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

using tenfold::test::same_bits;

// ---------------------------------------------------------------------------- .npy

template <class T>
class NpyTyped : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NpyTyped, FloatTypes);

TYPED_TEST(NpyTyped, RoundTripKeepsShapeAndBits) {
  using T = TypeParam;
  TempDir dir;
  const std::vector<std::vector<index_t>> shapes = {{3, 4, 5}, {7}, {}, {0, 3}, {2, 1, 3, 1}};
  for (const auto& dims : shapes) {
    const Tensor<T> x(dims,
                      random_values<T>(static_cast<std::size_t>(tenfold::checked_numel(dims)), 7));
    const fs::path p = dir / "x.npy";
    tenfold::io::save_npy<T>(p, x);
    NpyHeader h;
    const Tensor<T> y = tenfold::io::load_npy<T>(p, &h);
    EXPECT_EQ(y.dims(), dims);
    EXPECT_TRUE(same_bits(y.values(), x.values()));
    EXPECT_EQ(h.version_major, 1);
    EXPECT_EQ(h.dtype, sizeof(T) == 4 ? DType::float32 : DType::float64);
    EXPECT_TRUE(h.fortran_order);
    EXPECT_EQ(h.shape, dims);
    EXPECT_EQ(h.data_offset % 64, 0u);
    EXPECT_EQ(fs::file_size(p), h.data_offset + x.values().size() * sizeof(T));
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.npy"});
}

TEST(Npy, SaveWritesTheHeaderNumPyWrites) {
  TempDir dir;
  const auto header_text = [&](const std::vector<index_t>& dims) {
    tenfold::io::save_npy<double>(dir / "x.npy", Tensor<double>(dims));
    const std::string s = read_file(dir / "x.npy");
    return s.substr(10, s.find('}') - 9);
  };
  EXPECT_EQ(header_text({3, 4}), "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4), }");
  EXPECT_EQ(header_text({5}), "{'descr': '<f8', 'fortran_order': True, 'shape': (5,), }");
  EXPECT_EQ(header_text({}), "{'descr': '<f8', 'fortran_order': True, 'shape': (), }");
}

TEST(Npy, SaveInCOrderReversesTheShapeAndKeepsTheMemory) {
  TempDir dir;
  const Tensor<double> x({2, 3, 4}, random_values<double>(24, 3));
  tenfold::io::save_npy<double>(dir / "x.npy", x, tenfold::io::NpyOrder::c_reversed);
  const std::string s = read_file(dir / "x.npy");
  EXPECT_EQ(s.substr(10, s.find('}') - 9),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 3, 2), }");
  NpyHeader h;
  const Tensor<double> y = tenfold::io::load_npy<double>(dir / "x.npy", &h);
  EXPECT_FALSE(h.fortran_order);
  EXPECT_EQ(y.dims(), x.dims());
  EXPECT_TRUE(same_bits(y.values(), x.values()));
}

TEST(Npy, SaveUsesVersion2WhenTheHeaderExceeds64KiB) {
  TempDir dir;
  const std::vector<index_t> dims(25000, 1);  // "1, " x 25000 > 65535 characters
  const Tensor<float> x(dims, {2.5f});
  tenfold::io::save_npy<float>(dir / "x.npy", x);
  NpyHeader h;
  const Tensor<float> y = tenfold::io::load_npy<float>(dir / "x.npy", &h);
  EXPECT_EQ(h.version_major, 2);
  EXPECT_GT(h.data_offset, 65535u);
  EXPECT_EQ(h.data_offset % 64, 0u);
  EXPECT_EQ(y.dims(), dims);
  EXPECT_EQ(y[0], 2.5f);
}

// C-order files written by hand, as NumPy writes them, in every format version.
TYPED_TEST(NpyTyped, ReadsCOrderAsReversedModes) {
  using T = TypeParam;
  TempDir dir;
  const std::string descr = sizeof(T) == 4 ? "<f4" : "<f8";
  const std::vector<T> c_order = random_values<T>(24, 3);  // NumPy shape (2, 3, 4)
  for (int version = 1; version <= 3; ++version) {
    const fs::path p = dir / "c.npy";
    write_file(p,
               npy_file(version,
                        "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2, 3, 4), }",
                        bytes_of(c_order)));
    NpyHeader h;
    const Tensor<T> x = tenfold::io::load_npy<T>(p, &h);
    EXPECT_EQ(h.version_major, version);
    EXPECT_FALSE(h.fortran_order);
    EXPECT_EQ(h.shape, (std::vector<index_t>{2, 3, 4}));
    ASSERT_EQ(x.dims(), (std::vector<index_t>{4, 3, 2}));
    // NumPy a[i, j, k] sits at C offset (i * 3 + j) * 4 + k.
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) EXPECT_EQ(x(k, j, i), c_order[(i * 3 + j) * 4 + k]);
  }
}

TEST(Npy, ReadsFortranOrderWithTheSameShape) {
  TempDir dir;
  const std::vector<double> f_order = random_values<double>(6, 4);
  write_file(
      dir / "f.npy",
      npy_file(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", bytes_of(f_order)));
  const Tensor<double> x = tenfold::io::load_npy<double>(dir / "f.npy");
  ASSERT_EQ(x.dims(), (std::vector<index_t>{2, 3}));
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 2; ++i) EXPECT_EQ(x(i, j), f_order[i + 2 * j]);
}

struct Spelling {
  std::string dict;
  DType dtype;
  bool fortran;
  std::vector<index_t> shape;
};

TEST(Npy, AcceptsEveryValidSpellingOfTheHeader) {
  TempDir dir;
  const std::vector<Spelling> cases = {
      {"{'shape': (5,), 'fortran_order': False, 'descr': '<f8'}", DType::float64, false, {5}},
      {"{ \"descr\" : \"<f4\" ,\n\t'fortran_order' : True , 'shape' : ( 2 , 3 , ) , }",
       DType::float32,
       true,
       {2, 3}},
      {"{'descr': '|f8', 'fortran_order': False, 'shape': (2L, 3L), }",
       DType::float64,
       false,
       {2, 3}},
      {"{'descr': '=f4', 'fortran_order': False, 'shape': (), }", DType::float32, false, {}},
      {"{'descr':'<f8','fortran_order':False,'shape':(0, 9)}", DType::float64, false, {0, 9}},
  };
  for (const Spelling& c : cases) {
    index_t numel = 1;
    for (index_t d : c.shape) numel *= d;
    const std::size_t size = c.dtype == DType::float32 ? 4 : 8;
    write_file(dir / "s.npy",
               npy_file(3, c.dict, std::string(static_cast<std::size_t>(numel) * size, '\0')));
    const NpyHeader h = tenfold::io::read_npy_header(dir / "s.npy");
    EXPECT_EQ(h.dtype, c.dtype) << c.dict;
    EXPECT_EQ(h.fortran_order, c.fortran) << c.dict;
    EXPECT_EQ(h.shape, c.shape) << c.dict;
  }
}

TEST(Npy, ConvertsBetweenPrecisions) {
  TempDir dir;
  const std::vector<float> f = random_values<float>(12, 5);
  const std::vector<double> d = random_values<double>(12, 6);
  write_file(
      dir / "f.npy",
      npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", bytes_of(f)));
  write_file(
      dir / "d.npy",
      npy_file(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4), }", bytes_of(d)));
  const Tensor<double> fd = tenfold::io::load_npy<double>(dir / "f.npy");
  const Tensor<float> df = tenfold::io::load_npy<float>(dir / "d.npy");
  for (std::size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(fd.values()[i], static_cast<double>(f[i]));
    EXPECT_EQ(df.values()[i], static_cast<float>(d[i]));
  }
}

struct Damage {
  std::string what;
  std::string bytes;
  std::string message;  // expected part of the error message
};

TEST(Npy, RejectsDamagedFilesNamingTheProblem) {
  const std::string data(48, '\x01');  // (2, 3) float64
  const auto file = [&](const std::string& dict, const std::string& d, int version = 1) {
    return npy_file(version, dict, d);
  };
  const std::string good_dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string good = file(good_dict, data);
  const auto with_shape = [&](const std::string& shape, const std::string& d = "") {
    return file("{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }", d);
  };
  const auto with_descr = [&](const std::string& descr) {
    return file("{'descr': " + descr + ", 'fortran_order': False, 'shape': (2, 3), }", data);
  };
  std::string bad_magic = good;
  bad_magic[1] = 'X';
  std::string v4 = good;
  v4[6] = 4;
  std::string v11 = good;
  v11[7] = 1;
  std::string nul_dict = good_dict;
  nul_dict[16] = '\0';  // the space after "'<f8',"
  std::string long_header = good;
  long_header.replace(8, 2, le_bytes(5000, 2));
  const std::vector<Damage> cases = {
      {"wrong magic", bad_magic, "not a .npy file"},
      {"empty file", "", "not a .npy file"},
      {"magic only", "\x93NUMPY", "truncated .npy header"},
      {"no length", std::string("\x93NUMPY\x01\x00\x05", 9), "truncated .npy header"},
      {"version 4", v4, "version 4.0"},
      {"version 1.1", v11, "version 1.1"},
      {"header beyond file", long_header, "goes beyond the end of the file"},
      {"huge header length", std::string("\x93NUMPY\x02\x00", 8) + le_bytes(0xffffffffu, 4) + "{",
       "exceeds the limit"},
      {"no newline", npy_file(1, good_dict, data, false), "does not end with a newline"},
      {"truncated data", good.substr(0, good.size() - 8), "needs 48 data bytes, the file has 40"},
      {"trailing bytes", good + "abc", "needs 48 data bytes, the file has 51"},
      {"shape disagrees", with_shape("(2, 4)", data), "needs 64 data bytes, the file has 48"},
      {"int64", with_descr("'<i8'"), "unsupported dtype '<i8'"},
      {"float16", with_descr("'<f2'"), "unsupported dtype '<f2'"},
      {"object", with_descr("'O'"), "unsupported dtype 'O'"},
      {"big-endian", with_descr("'>f8'"), "big-endian dtype '>f8'"},
      {"structured", with_descr("[('a', '<f8')]"), "not a simple dtype string"},
      {"absurd shape", with_shape("(4611686018427387904, 4611686018427387904)"),
       "more elements than"},
      {"absurd empty shape", with_shape("(0, 4611686018427387904, 4611686018427387904)"),
       "more elements than a 64-bit index can count"},  // its reverse is rejected too
      {"data size overflow", with_shape("(2305843009213693952,)"), "overflows 64 bits"},
      {"huge data size", with_shape("(1152921504606846976,)"),
       "needs 9223372036854775808 data bytes"},
      {"size beyond 64 bits", with_shape("(99999999999999999999,)"), "does not fit in 64 bits"},
      {"negative size", with_shape("(-1, 3)"), "negative size"},
      {"not a tuple", with_shape("(6)", data), "not a tuple"},
      {"shape is a list", with_shape("[2, 3]", data), "expected '('"},
      {"missing key", file("{'descr': '<f8', 'fortran_order': False}", data),
       "key 'shape' is missing"},
      {"duplicate key",
       file("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, "
            "'shape': (2, 3)}",
            data),
       "key 'descr' appears twice"},
      {"unknown key",
       file("{'descr': '<f8', 'extra': 1, 'fortran_order': False, "
            "'shape': (2, 3)}",
            data),
       "unexpected key 'extra'"},
      {"unclosed dict", file("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)", data),
       "expected '}'"},
      {"missing comma", file("{'descr': '<f8' 'fortran_order': False, 'shape': (2, 3)}", data),
       "expected '}'"},
      {"bad bool", file("{'descr': '<f8', 'fortran_order': 'yes', 'shape': (2, 3)}", data),
       "True or False"},
      {"garbage after dict", file(good_dict + " x", data), "unexpected characters after the dict"},
      {"empty dict text", file("", data), "expected '{'"},
      {"NUL in dict", file(nul_dict, data), "expected a quoted string"},
      {"unterminated string", file("{'descr': '<f8", data), "unterminated string"},
      {"escape", file("{'descr': '<f\\8', 'fortran_order': False, 'shape': (2, 3)}", data),
       "escape in string"},
  };
  TempDir dir;
  for (const Damage& c : cases) {
    const fs::path p = dir / "bad.npy";
    write_file(p, c.bytes);
    const std::string m1 = error_of<IoError>([&] { tenfold::io::read_npy_header(p); });
    EXPECT_NE(m1.find(c.message), std::string::npos) << c.what << ": " << m1;
    EXPECT_NE(m1.find(p.string()), std::string::npos) << c.what << ": " << m1;
    const std::string m2 = error_of<IoError>([&] { tenfold::io::load_npy<float>(p); });
    EXPECT_EQ(m1, m2) << c.what;
  }
}

TEST(Npy, MissingFileAndFolderAreIoErrors) {
  TempDir dir;
  const std::string m = error_of<IoError>([&] { tenfold::io::load_npy<double>(dir / "nope.npy"); });
  EXPECT_NE(m.find("nope.npy"), std::string::npos) << m;
  const std::string f = error_of<IoError>([&] { tenfold::io::load_npy<double>(dir.path()); });
  EXPECT_NE(f.find("not a regular file"), std::string::npos) << f;
}

// The real data set: NumPy shape (438, 6, 11), '<f8', C order.
TEST(Npy, ReadsTheCovid19DataSet) {
  const fs::path p = fs::path(TENFOLD_TEST_DATA_DIR) / "COVID19_data.npy";
  NpyHeader h;
  const Tensor<double> x = tenfold::io::load_npy<double>(p, &h);
  EXPECT_EQ(h.shape, (std::vector<index_t>{438, 6, 11}));
  EXPECT_FALSE(h.fortran_order);
  EXPECT_EQ(h.dtype, DType::float64);
  ASSERT_EQ(x.dims(), (std::vector<index_t>{11, 6, 438}));
  // Spot value: NumPy a[100, 3, 7] read straight from the file's bytes.
  const std::string raw = read_file(p);
  double expected;
  std::memcpy(&expected, raw.data() + h.data_offset + ((100 * 6 + 3) * 11 + 7) * 8, 8);
  EXPECT_EQ(x(7, 3, 100), expected);
  EXPECT_EQ(std::memcmp(raw.data() + h.data_offset, x.data(), raw.size() - h.data_offset), 0);
}

TEST(Npy, ReadsTheIl2DataSetWithItsMissingValues) {
  const Tensor<float> x =
      tenfold::io::load_npy<float>(fs::path(TENFOLD_TEST_DATA_DIR) / "IL2_Response_Tensor.npy");
  EXPECT_EQ(x.dims(), (std::vector<index_t>{8, 12, 4, 13}));
  EXPECT_EQ(
      std::count_if(x.values().begin(), x.values().end(), [](float v) { return std::isnan(v); }),
      192);  // as documented in tests/data/README.md
}

// --------------------------------------------------------------- atomic writes

TEST(AtomicWrite, ReplacesTheTargetAndLeavesNoTemporaryFile) {
  TempDir dir;
  write_file(dir / "t.txt", "old");
  tenfold::io::write_file_atomically(dir / "t.txt", [](std::ostream& os) { os << "new content"; });
  EXPECT_EQ(read_file(dir / "t.txt"), "new content");
  tenfold::io::write_file_atomically(dir / "u.txt", [](std::ostream& os) { os << "fresh"; });
  EXPECT_EQ(read_file(dir / "u.txt"), "fresh");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"t.txt", "u.txt"}));
}

TEST(AtomicWrite, WriterExceptionLeavesTheTargetUntouched) {
  TempDir dir;
  write_file(dir / "t.txt", "old");
  const std::string m = error_of<std::length_error>([&] {
    tenfold::io::write_file_atomically(dir / "t.txt", [](std::ostream& os) {
      os << "half written";
      throw std::length_error("writer gave up");
    });
  });
  EXPECT_EQ(m, "writer gave up");
  EXPECT_EQ(read_file(dir / "t.txt"), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.txt"});
}

TEST(AtomicWrite, StreamFailureLeavesTheTargetUntouched) {
  TempDir dir;
  write_file(dir / "t.txt", "old");
  const std::string m = error_of<IoError>([&] {
    tenfold::io::write_file_atomically(dir / "t.txt", [](std::ostream& os) {
      os << "partial";
      os.setstate(std::ios::badbit);  // as a full disk would
    });
  });
  EXPECT_NE(m.find("failed"), std::string::npos) << m;
  EXPECT_EQ(read_file(dir / "t.txt"), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.txt"});
}

TEST(AtomicWrite, FailsCleanlyWhenTheTargetCannotBeReplaced) {
  TempDir dir;
  fs::create_directories(dir / "sub" / "inner");  // a non-empty folder cannot be replaced
  const std::string m =
      error_of<IoError>([&] { tenfold::io::save_npy<double>(dir / "sub", Tensor<double>({2})); });
  EXPECT_NE(m.find("cannot replace"), std::string::npos) << m;
  EXPECT_TRUE(fs::is_directory(dir / "sub" / "inner"));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"sub"});
  // A missing folder is created; one that cannot be (a file is in the way) is named.
  tenfold::io::write_file_atomically(dir / "none" / "t.txt", [](std::ostream& os) { os << 1; });
  EXPECT_TRUE(fs::is_regular_file(dir / "none" / "t.txt"));
  const std::string blocked = error_of<IoError>([&] {
    tenfold::io::write_file_atomically(dir / "none" / "t.txt" / "u.txt",
                                       [](std::ostream& os) { os << 1; });
  });
  EXPECT_NE(blocked.find("cannot create the folder"), std::string::npos) << blocked;
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"none", "sub"}));
}

// ---------------------------------------------------------------- safetensors

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
