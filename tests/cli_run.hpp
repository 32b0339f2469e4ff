// Runs the `tenfold` program (TENFOLD_CLI) as a user runs it, through the shell,
// capturing its exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "temp_dir.hpp"

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct CliRun {
  int code = -1;
  std::string out, err;
  int err_lines() const {
    int n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

/// Runs `tenfold ARGS`; stdout and stderr pass through files in `dir`.
inline CliRun tenfold_cli(const TempDir& dir, const std::string& args) {
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd =
      std::string(TENFOLD_CLI) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}
