// An .npz archive unpacked into a temporary folder of .npy files (removed with the object),
// for the commands that read a folder of arrays (tenfold parafac2).
#pragma once

#include <filesystem>
#include <string>

namespace tenfold::cli {

class NpzFolder {
 public:
  /// Unpacks the top-level .npy entries of `npz` (stored, or deflated where the program was
  /// built with zlib; not ZIP64, each entry's CRC checked). Throws IoError naming the file.
  explicit NpzFolder(const std::string& npz);
  ~NpzFolder();
  NpzFolder(const NpzFolder&) = delete;
  NpzFolder& operator=(const NpzFolder&) = delete;

  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace tenfold::cli
