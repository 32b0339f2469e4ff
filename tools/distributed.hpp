// The program under mpirun: the same commands, each process reading its block of the
// input (tenfold::mpi), rank 0 writing the outputs. Without MPI in the build, a run
// under mpirun with several processes is refused (each would run the whole job).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tenfold/cp.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::cli {

/// Initialises MPI for the program's lifetime when it was started by mpirun (Open MPI,
/// or a PMI launcher) and the build has MPI; finalises it on destruction.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

/// True when the commands run distributed (under mpirun, built with MPI).
bool distributed();

/// True on the process that writes the outputs and prints (rank 0, or any serial run).
bool writes_outputs();

/// cp_als of the .npy file `input` (header h), distributed, with the start and the
/// result in the serial convention for that file (modes reversed for a C-order file,
/// as load_npy gives them). `report` receives the processes, grid and communication
/// per phase.
template <class T>
CpResult<T> distributed_cp(const std::string& input, const io::NpyHeader& h,
                           const CpOptions& options, CpStart<T> initial_factors,
                           nlohmann::json& report);

/// tucker of the .npy file `input`, distributed; as distributed_cp.
template <class T>
TuckerResult<T> distributed_tucker(const std::string& input, const io::NpyHeader& h,
                                   const TuckerOptions& options, nlohmann::json& report);

}  // namespace tenfold::cli
