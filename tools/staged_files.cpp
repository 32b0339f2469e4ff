#include "staged_files.hpp"

#include <unistd.h>

#include <string>
#include <system_error>

#include "tenfold/error.hpp"

namespace tenfold::cli {

namespace fs = std::filesystem;

StagedFiles::~StagedFiles() {
  for (const Entry& e : entries_) {
    std::error_code ignored;
    fs::remove(e.temporary, ignored);
  }
}

fs::path StagedFiles::stage(const fs::path& out) {
  std::error_code ec;
  const fs::path target = fs::absolute(out, ec);
  fs::path folder = target.parent_path();
  while (!fs::exists(folder, ec) && folder.has_relative_path()) folder = folder.parent_path();
  // (built by appending: GCC 12 warns falsely on "." + std::string)
  std::string name = ".";
  name += target.filename().string();
  name += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(entries_.size());
  const fs::path temporary = folder / name;
  entries_.push_back({temporary, target});
  return temporary;
}

void StagedFiles::commit() {
  for (const Entry& e : entries_) {
    std::error_code ec;
    fs::create_directories(e.out.parent_path(), ec);
    if (ec) {
      throw IoError("cannot create the folder '" + e.out.parent_path().string() +
                    "': " + ec.message());
    }
  }
  for (const Entry& e : entries_) {
    std::error_code ec;
    fs::rename(e.temporary, e.out, ec);
    if (ec) throw IoError("cannot write '" + e.out.string() + "': " + ec.message());
  }
  entries_.clear();
}

}  // namespace tenfold::cli
