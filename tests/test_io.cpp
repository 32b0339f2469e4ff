// Tests of the file formats: .npy and atomic file replacement (safetensors in
// test_safetensors.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io_test_util.hpp"
#include "same_bits.hpp"
#include "temp_dir.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;
using tenfold::IoError;
using tenfold::Tensor;
using tenfold::io::DType;
using tenfold::io::NpyHeader;
using tenfold::test::bytes_of;
using tenfold::test::Damage;
using tenfold::test::error_of;
using tenfold::test::le_bytes;
using tenfold::test::random_values;
using tenfold::test::read_file;
using tenfold::test::write_file;

namespace {

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

}  // namespace
