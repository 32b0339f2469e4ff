// The subcommands of `tenfold`; each adds itself to the app and returns its runner.
#pragma once

#include "common.hpp"

namespace tenfold::cli {

Command add_cp_command(CLI::App& app);
Command add_cp_apr_command(CLI::App& app);
Command add_gcp_command(CLI::App& app);
Command add_tucker_command(CLI::App& app);
Command add_parafac2_command(CLI::App& app);  // tools/cmd_parafac2.cpp
Command add_cmtf_command(CLI::App& app);      // tools/cmd_cmtf.cpp
Command add_tt_command(CLI::App& app);        // tools/cmd_tt.cpp
Command add_nntucker_command(CLI::App& app);  // tools/cmd_nntucker.cpp
Command add_attention_command(CLI::App& app);

}  // namespace tenfold::cli
