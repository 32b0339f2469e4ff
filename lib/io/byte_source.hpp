// Random-access byte sources the file readers parse: an open file, or a memory
// buffer (used by the fuzz targets). Reads are bounds-checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <span>
#include <string>

namespace tenfold::io::detail {

/// Read-only bytes with a known size.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Total number of bytes.
  virtual std::uint64_t size() const = 0;
  /// Fills `out` with the bytes [offset, offset + out.size()); throws IoError when they
  /// are not all there.
  virtual void read(std::uint64_t offset, std::span<std::byte> out) const = 0;
  /// What to call the source in messages: the quoted path, or "<memory>".
  const std::string& name() const { return name_; }

 protected:
  explicit ByteSource(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

/// A regular file, kept open (so the bytes read later belong to the file that was
/// indexed, even if the path is replaced meanwhile). Reads are serialised.
class FileSource final : public ByteSource {
 public:
  /// Opens `path`; throws IoError if it is missing, not a regular file, or unreadable.
  explicit FileSource(const std::filesystem::path& path);
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::span<std::byte> out) const override;

 private:
  mutable std::mutex mutex_;
  mutable std::ifstream in_;
  std::uint64_t size_ = 0;
};

/// A memory buffer, not copied: it must outlive the source.
class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::span<const std::byte> bytes) : ByteSource("<memory>"), bytes_(bytes) {}
  std::uint64_t size() const override { return bytes_.size(); }
  void read(std::uint64_t offset, std::span<std::byte> out) const override;

 private:
  std::span<const std::byte> bytes_;
};

/// Throws IoError("<source name>: <what>").
[[noreturn]] void fail(const ByteSource& source, const std::string& what);

/// a * b, throwing IoError (naming `what` in `source`) when it overflows 64 bits.
std::uint64_t checked_mul(const ByteSource& source, std::uint64_t a, std::uint64_t b,
                          const char* what);

}  // namespace tenfold::io::detail
