// tenfold: command-line front end of the Tenfold library.
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "distributed.hpp"
#include "tenfold/error.hpp"

namespace {

// OpenBLAS picks its kernels when it loads, from the processor's model; a processor
// newer than the OpenBLAS build (Debian 12's 0.3.21 on Intel family 6 model 207, for
// example) gets the generic kernels of an old one, at a quarter to a half of the speed
// its Haswell (AVX2) kernels reach there. When the user has not chosen a kernel
// (OPENBLAS_CORETYPE), OpenBLAS reports such a pre-AVX2 kernel and the processor has
// AVX2 and FMA, the program runs itself again with OPENBLAS_CORETYPE=Haswell. If that
// cannot be done, it carries on with the kernel OpenBLAS chose. (BLIS picks its kernels
// from the processor's features: nothing to do there.)
void run_again_with_avx2_blas_kernel([[maybe_unused]] char** argv) {
#if defined(TENFOLD_BLAS_OPENBLAS)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  std::string core = openblas_get_corename();
  std::transform(core.begin(), core.end(), core.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  constexpr std::string_view kPreAvx2[] = {"katmai",     "coppermine", "northwood", "prescott",
                                           "banias",     "atom",       "core2",     "penryn",
                                           "dunnington", "nehalem",    "opteron",   "barcelona"};
  if (std::find(std::begin(kPreAvx2), std::end(kPreAvx2), core) == std::end(kPreAvx2)) return;
  if (setenv("OPENBLAS_CORETYPE", "Haswell", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tenfold::cli;
  run_again_with_avx2_blas_kernel(argv);
  // Under mpirun: MPI for the program's lifetime (each command then runs distributed).
  std::optional<MpiSession> mpi;
  try {
    mpi.emplace(argc, argv);
    // Under mpirun every process must run the same command.
    check_same_command_line(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tenfold: error: %s\n", e.what());
    return 2;
  }
  CLI::App app{
      "Tenfold: tensor decompositions (CP-ALS, CP-APR, Tucker) of dense and sparse tensors on CPU "
      "and GPU",
      "tenfold"};
  app.set_version_flag("--version", TENFOLD_VERSION);
  app.require_subcommand(1);
  const std::vector<Command> commands = {
      add_cp_command(app),     add_cp_apr_command(app),   add_gcp_command(app),
      add_tucker_command(app), add_parafac2_command(app), add_cmtf_command(app),
      add_tt_command(app),     add_nntucker_command(app), add_attention_command(app)};

  const auto known = [&](const std::string& name) {
    for (const Command& c : commands)
      if (c.app->get_name() == name) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !known(argv[1])) {
    std::string names;
    for (const Command& c : commands) names += (names.empty() ? "" : ", ") + c.app->get_name();
    std::fprintf(stderr, "tenfold: error: unknown command '%s' (expected one of: %s)\n", argv[1],
                 names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tenfold: error: %s (see tenfold --help)\n", e.what());
    return 2;
  }
  for (const Command& cmd : commands) {
    if (!cmd.app->parsed()) continue;
    const std::string name = cmd.app->get_name();
    try {
      return cmd.run();
    } catch (const CLI::Error& e) {
      // A usage error that only the input could reveal (--shape for a .npy input).
      std::fprintf(stderr, "tenfold %s: error: %s\n", name.c_str(), e.what());
      return 2;
    } catch (const tenfold::InvalidOption& e) {
      // The library names its option field; the user typed the flag.
      const std::string flag = flag_of(cmd, e.option());
      std::fprintf(stderr, "tenfold %s: error: %s\n", name.c_str(),
                   flag.empty() ? e.what() : (flag + " " + e.problem()).c_str());
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "tenfold %s: error: out of memory\n", name.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tenfold %s: error: %s\n", name.c_str(), e.what());
    }
    return 1;
  }
  return 2;
}
