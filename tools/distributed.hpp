// The program under mpirun: the same commands, each process reading its block of the
// input (tenfold::mpi), rank 0 writing the outputs. Without MPI in the build, a run
// under mpirun with several processes is refused (each would run the whole job).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenfold/cp.hpp"
#include "tenfold/io.hpp"
#include "tenfold/sparse.hpp"
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

/// Under mpirun: throws InvalidArgument on every process unless every process was started
/// with the same arguments (an MPMD command line `mpirun -np 1 tenfold ... : -np 1 tenfold
/// ...` with different ones), naming the first that differs. Nothing without mpirun.
void check_same_command_line(int argc, char** argv);

/// Runs f; under mpirun on every process, and an error on any process is thrown on every
/// process (tenfold::mpi::on_every_process), so that none waits in a collective call for
/// one that gave up. For the steps of a command that read files or check them.
void on_every_process(const std::function<void()>& f);

/// read_input_header; under mpirun every process reads it, and an error on any, or a
/// header that differs between processes (another file), is an error on every process.
io::NpyHeader read_input_header_everywhere(const std::string& path);

/// True when the commands run distributed (under mpirun, built with MPI).
bool distributed();

/// True on the process that writes the outputs and prints (rank 0, or any serial run).
bool writes_outputs();

/// Adds --grid P0xP1x... (the process grid under mpirun, per NumPy axis) to a subcommand;
/// an empty value is a usage error.
void add_grid_option(CLI::App& cmd, std::string& grid);

/// The process grid of --grid `text` whatever the input's shape: one positive entry per
/// axis, product the number of processes (1 without mpirun); checked as parse_grid.
std::vector<int> parse_grid(const std::string& text);

/// The process grid of --grid `text` for an input of NumPy shape `shape`, checked before
/// any work and identically on every process (so that every process reports the same
/// error and none waits in a collective call): one positive entry per NumPy axis, at most
/// that axis' size, product the number of processes (1 without mpirun). Empty text
/// (no --grid): empty grid (the library chooses). Throws InvalidArgument naming --grid.
std::vector<int> parse_grid(const std::string& text, const std::vector<index_t>& shape);

/// cp_als of the .npy file `input` (header h), distributed over `grid` (per NumPy axis;
/// empty: chosen by the library), with the start and the result in the serial convention
/// for that file (modes reversed for a C-order file, as load_npy gives them). `report`
/// receives the processes, grid and communication per phase.
template <class T>
CpResult<T> distributed_cp(const std::string& input, const io::NpyHeader& h,
                           const std::vector<int>& grid, const CpOptions& options,
                           CpStart<T> initial_factors, nlohmann::json& report);

/// A sparse tensor file (.tns or .tfsparse) read under mpirun, each process its share,
/// distributed over `grid` (per NumPy axis; empty: chosen by the library).
template <class T>
class DistributedSparse {
 public:
  DistributedSparse(const std::string& input, const std::vector<index_t>& shape,
                    const std::vector<int>& grid);
  ~DistributedSparse();
  const std::vector<index_t>& dims() const;
  index_t nnz() const;
  /// The CSF layout `csf` resolves to, alike on every process, for cp (which takes the
  /// blocks' entries).
  CsfLayout layout(CsfLayout csf) const;
  /// cp_als of the tensor, which releases the block's entries once its trees are built
  /// (call it once); `report` receives the processes, grid and communication per phase.
  CpResult<T> cp(const CpOptions& options, CpStart<T> initial_factors, CsfLayout layout,
                 nlohmann::json& report);

 private:
  struct Data;
  std::unique_ptr<Data> x_;
};

/// tucker of the .npy file `input`, distributed; as distributed_cp.
template <class T>
TuckerResult<T> distributed_tucker(const std::string& input, const io::NpyHeader& h,
                                   const std::vector<int>& grid, const TuckerOptions& options,
                                   nlohmann::json& report);

}  // namespace tenfold::cli
