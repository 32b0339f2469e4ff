// Outputs written after the work, all or none: a command that writes several files
// writes each under a hidden temporary name first, and renames them into place only
// when every one is complete, so a failure leaves every output as it was.
#pragma once

#include <filesystem>
#include <vector>

namespace tenfold::cli {

class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  /// Removes the temporaries of a set that was not committed.
  ~StagedFiles();

  /// The path to write `out` to: ".<name>.tmp.<pid>.<k>" in the nearest existing folder
  /// on the way to `out` (so that the rename stays on one file system and no folder is
  /// created before commit).
  std::filesystem::path stage(const std::filesystem::path& out);

  /// Creates the missing folders of every output, then renames each temporary over its
  /// output. Throws IoError naming the output that could not be placed.
  void commit();

 private:
  struct Entry {
    std::filesystem::path temporary, out;
  };
  std::vector<Entry> entries_;
};

}  // namespace tenfold::cli
