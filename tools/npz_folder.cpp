// An .npz archive (NumPy's savez / savez_compressed: a ZIP of .npy files, stored or
// deflated) unpacked into a temporary folder of .npy files.
#include "npz_folder.hpp"

#if defined(TENFOLD_CLI_ZLIB)
#include <zlib.h>
#endif

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tenfold/error.hpp"

namespace tenfold::cli {
namespace {

std::uint32_t le(const std::string& b, std::size_t at, int bytes) {
  if (at + static_cast<std::size_t>(bytes) > b.size()) throw IoError("truncated");
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<std::size_t>(i)]);
  return v;
}

// Entry data: stored as is, or raw deflate.
std::string inflated(const std::string& data, std::uint32_t size, std::uint32_t method) {
  if (method == 0) return data;
#if defined(TENFOLD_CLI_ZLIB)
  if (method != 8) throw IoError("compression method " + std::to_string(method));
  std::string out(size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw IoError("zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  inflateEnd(&z);
  if (rc != Z_STREAM_END || z.total_out != size) throw IoError("corrupt deflate stream");
  return out;
#else
  (void)size;
  throw IoError("compressed entries need a build with zlib (np.savez, not savez_compressed)");
#endif
}

}  // namespace

NpzFolder::NpzFolder(const std::string& npz) {
  const auto fail = [&](const std::string& why) {
    throw IoError("cannot read '" + npz + "' as an .npz archive: " + why);
  };
  std::ifstream in(npz, std::ios::binary);
  if (!in) fail("cannot open it");
  const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    // End of central directory: the last "PK\5\6" within the final 64 KiB + 22 bytes
    std::size_t eocd = std::string::npos;
    for (std::size_t i = b.size() >= 22 ? b.size() - 22 : 0, stop = i > 65557 ? i - 65557 : 0;;
         --i) {
      if (le(b, i, 4) == 0x06054b50) {
        eocd = i;
        break;
      }
      if (i == stop) break;
    }
    if (eocd == std::string::npos) fail("no ZIP directory");
    const std::uint32_t entries = le(b, eocd + 10, 2), cd = le(b, eocd + 16, 4);
    if (cd == 0xffffffffu || entries == 0xffffu) fail("ZIP64 archives are not read");
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() /
           ("tenfold-npz-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
    for (std::size_t e = 0, at = cd; e < entries; ++e) {
      if (le(b, at, 4) != 0x02014b50) fail("bad directory entry");
      const std::uint32_t method = le(b, at + 10, 2), crc = le(b, at + 16, 4),
                          packed = le(b, at + 20, 4), size = le(b, at + 24, 4),
                          name_len = le(b, at + 28, 2), extra = le(b, at + 30, 2),
                          comment = le(b, at + 32, 2), local = le(b, at + 42, 4);
      const std::string name = b.substr(at + 46, name_len);
      at += 46 + name_len + extra + comment;
      if (packed == 0xffffffffu || size == 0xffffffffu || local == 0xffffffffu) {
        fail("ZIP64 archives are not read");
      }
      const std::filesystem::path file = std::filesystem::path(name).filename();
      if (file.extension() != ".npy" || file.string() != name) continue;  // only top-level .npy
      if (le(b, local, 4) != 0x04034b50) fail("bad entry header of '" + name + "'");
      const std::size_t data = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
      if (data + packed > b.size()) fail("truncated entry '" + name + "'");
      const std::string bytes = inflated(b.substr(data, packed), size, method);
#if defined(TENFOLD_CLI_ZLIB)
      if (crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())) !=
          crc) {
        fail("entry '" + name + "' fails its checksum");
      }
#else
      (void)crc;
#endif
      std::ofstream(dir_ / file, std::ios::binary)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
  } catch (const IoError& e) {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
    const std::string what = e.what();
    if (what.rfind("cannot read", 0) == 0) throw;
    fail(what);
  }
}

NpzFolder::~NpzFolder() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace tenfold::cli
