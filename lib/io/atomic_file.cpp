// Atomic file replacement: write a temporary file next to the target, flush it to
// disk, then rename it over the target (rename is atomic within a file system).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "tenfold/error.hpp"
#include "tenfold/io.hpp"

namespace tenfold::io {
namespace {

std::string quoted(const std::filesystem::path& p) {
  std::string s = "'";
  return s.append(p.string()).append("'");
}

// Creates an empty file ".<name>.tmp.<pid>.<counter>" in `dir` that did not exist
// before (O_EXCL), so that concurrent writers never share a temporary file.
std::filesystem::path create_temp_file(const std::filesystem::path& dir,
                                       const std::filesystem::path& name) {
  static std::atomic<unsigned long> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::filesystem::path tmp = dir / std::string(".")
                                                .append(name.string())
                                                .append(".tmp.")
                                                .append(std::to_string(::getpid()))
                                                .append(".")
                                                .append(std::to_string(counter.fetch_add(1)));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return tmp;
    }
    if (errno != EEXIST) {
      throw IoError("cannot create a temporary file " + quoted(tmp) + ": " + std::strerror(errno));
    }
  }
  throw IoError("cannot find an unused temporary file name in " + quoted(dir));
}

// fsync of a file or folder; `required` makes a failure an IoError.
void sync_path(const std::filesystem::path& p, bool required) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok && required) throw IoError("cannot flush " + quoted(p) + ": " + std::strerror(err));
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(std::ostream&)>& writer) {
  if (!path.has_filename()) throw IoError("cannot write " + quoted(path) + ": not a file name");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const std::filesystem::path tmp = create_temp_file(dir, path.filename());
  try {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os) throw IoError("cannot open " + quoted(tmp) + " for writing");
    writer(os);
    os.flush();
    if (!os) throw IoError("writing " + quoted(tmp) + " failed");
    os.close();
    if (os.fail()) throw IoError("closing " + quoted(tmp) + " failed");
    sync_path(tmp, true);
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw IoError("cannot replace " + quoted(path) + ": " + ec.message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  // Make the rename itself durable; the target is already replaced, so a failure here
  // cannot be reported as "untouched" and is ignored.
  sync_path(dir, false);
}

}  // namespace tenfold::io
