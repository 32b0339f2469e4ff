// Atomic file replacement: write a temporary file next to the target, flush it to
// disk, then rename it over the target (rename is atomic within a file system).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
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

// Creates an empty file (or folder) ".<name>.tmp.<pid>.<counter>" in `dir` that did
// not exist before (O_EXCL, mkdir), so that concurrent writers never share one.
std::filesystem::path create_temp(const std::filesystem::path& dir,
                                  const std::filesystem::path& name, bool folder) {
  static std::atomic<unsigned long> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::filesystem::path tmp = dir / std::string(".")
                                                .append(name.string())
                                                .append(".tmp.")
                                                .append(std::to_string(::getpid()))
                                                .append(".")
                                                .append(std::to_string(counter.fetch_add(1)));
    if (folder) {
      if (::mkdir(tmp.c_str(), 0777) == 0) return tmp;
    } else if (const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
               fd >= 0) {
      ::close(fd);
      return tmp;
    }
    if (errno != EEXIST) {
      throw IoError(std::string("cannot create a temporary ") + (folder ? "folder " : "file ") +
                    quoted(tmp) + ": " + std::strerror(errno));
    }
  }
  throw IoError("cannot find an unused temporary name in " + quoted(dir));
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
  std::error_code made;
  std::filesystem::create_directories(dir, made);
  if (made) throw IoError("cannot create the folder " + quoted(dir) + ": " + made.message());
  const std::filesystem::path tmp = create_temp(dir, path.filename(), false);
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

void write_folder_atomically(const std::filesystem::path& dir,
                             const std::function<void(const std::filesystem::path&)>& writer) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // The folder a symlink points to is the one replaced; "out/" and "out/." name "out".
  const fs::path target = fs::weakly_canonical(fs::absolute(dir), ec);
  if (ec || !target.has_filename() || target == target.root_path()) {
    throw IoError("cannot write the folder " + quoted(dir) + ": it needs a name");
  }
  const fs::path parent = target.parent_path();
  fs::create_directories(parent, ec);
  if (ec) throw IoError("cannot create the folder " + quoted(parent) + ": " + ec.message());
  const fs::path tmp = create_temp(parent, target.filename(), true);
  const auto discard = [](const fs::path& p) {
    std::error_code ignored;
    fs::remove_all(p, ignored);
  };
  try {
    writer(tmp);
    sync_path(tmp, true);
    if (fs::exists(fs::symlink_status(target, ec))) {
      // Swap the complete new folder with the old one in one step, then drop the old.
      if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
          throw IoError("cannot replace the folder " + quoted(target) + ": " +
                        std::strerror(errno));
        }
        // No exchange on this file system: move the old folder aside, then the new in.
        const fs::path old = create_temp(parent, target.filename(), true);
        fs::rename(target, old, ec);
        if (ec) {
          discard(old);
          throw IoError("cannot replace the folder " + quoted(target) + ": " + ec.message());
        }
        fs::rename(tmp, target, ec);
        if (ec) {
          fs::rename(old, target);
          throw IoError("cannot replace the folder " + quoted(target) + ": " + ec.message());
        }
        discard(old);
      } else {
        discard(tmp);  // now the old folder
      }
    } else {
      fs::rename(tmp, target, ec);
      if (ec) throw IoError("cannot create the folder " + quoted(target) + ": " + ec.message());
    }
  } catch (...) {
    discard(tmp);
    throw;
  }
  sync_path(parent, false);
}

}  // namespace tenfold::io
