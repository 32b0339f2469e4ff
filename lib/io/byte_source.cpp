#include "io/byte_source.hpp"

#include <cerrno>
#include <cstring>

#include "tenfold/error.hpp"

namespace tenfold::io::detail {
namespace {

// Throws unless [offset, offset + count) lies within a source of `size` bytes.
void check_range(const ByteSource& source, std::uint64_t size, std::uint64_t offset,
                 std::uint64_t count) {
  if (offset > size || count > size - offset) {
    fail(source, "reading " + std::to_string(count) + " bytes at offset " + std::to_string(offset) +
                     " goes beyond the end (" + std::to_string(size) + " bytes)");
  }
}

}  // namespace

FileSource::FileSource(const std::filesystem::path& path)
    : ByteSource(std::string("'").append(path.string()).append("'")) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    fail(*this, "cannot open: " + (ec ? ec.message() : std::string("no such file")));
  }
  if (!std::filesystem::is_regular_file(status)) fail(*this, "not a regular file");
  in_.open(path, std::ios::binary);
  if (!in_) fail(*this, std::string("cannot open: ") + std::strerror(errno));
  in_.seekg(0, std::ios::end);
  const std::streamoff end = in_.tellg();
  if (!in_ || end < 0) fail(*this, "cannot determine the file size");
  size_ = static_cast<std::uint64_t>(end);
}

void FileSource::read(std::uint64_t offset, std::span<std::byte> out) const {
  check_range(*this, size_, offset, out.size());
  const std::lock_guard<std::mutex> lock(mutex_);
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (static_cast<std::uint64_t>(in_.gcount()) != out.size()) {
    fail(*this, "read " + std::to_string(in_.gcount()) + " of " + std::to_string(out.size()) +
                    " bytes at offset " + std::to_string(offset) +
                    " (was the file truncated while open?)");
  }
}

void MemorySource::read(std::uint64_t offset, std::span<std::byte> out) const {
  check_range(*this, bytes_.size(), offset, out.size());
  if (!out.empty()) std::memcpy(out.data(), bytes_.data() + offset, out.size());
}

void fail(const ByteSource& source, const std::string& what) {
  throw IoError(source.name() + ": " + what);
}

std::uint64_t checked_mul(const ByteSource& source, std::uint64_t a, std::uint64_t b,
                          const char* what) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    fail(source, std::string(what) + " " + std::to_string(a) + " x " + std::to_string(b) +
                     " overflows 64 bits");
  }
  return r;
}

}  // namespace tenfold::io::detail
