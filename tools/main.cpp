// tenfold: command-line front end of the Tenfold library.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tenfold/error.hpp"

int main(int argc, char** argv) {
  using namespace tenfold::cli;
  CLI::App app{"Tenfold: dense tensor decompositions (CP-ALS, Tucker) on CPU and GPU", "tenfold"};
  app.set_version_flag("--version", TENFOLD_VERSION);
  app.require_subcommand(1);
  const std::vector<Command> commands = {add_cp_command(app), add_tucker_command(app),
                                         add_attention_command(app)};

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
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "tenfold %s: error: out of memory\n", name.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tenfold %s: error: %s\n", name.c_str(), e.what());
    }
    return 1;
  }
  return 2;
}
