// Gathers a block-distributed tensor through the installed tenfold::mpi: every process
// fills its block with the global linear index of each entry, and the gathered tensor
// must hold 0, 1, 2, ... in column-major order.
#include <mpi.h>

#include <cstdio>
#include <memory>
#include <tenfold/mpi.hpp>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int failed = 0;
  {
    const std::vector<tenfold::index_t> dims{4, 3, 5};
    auto grid = std::make_shared<const tenfold::mpi::ProcessGrid>(MPI_COMM_WORLD, dims);
    auto x = tenfold::mpi::DistTensor<double>::make(grid, dims);
    const auto& local = x.local.dims();
    for (tenfold::index_t k = 0; k < local[2]; ++k)
      for (tenfold::index_t j = 0; j < local[1]; ++j)
        for (tenfold::index_t i = 0; i < local[0]; ++i)
          x.local[i + local[0] * (j + local[1] * k)] = static_cast<double>(
              x.offsets[0] + i + dims[0] * (x.offsets[1] + j + dims[1] * (x.offsets[2] + k)));
    const tenfold::Tensor<double> all = tenfold::mpi::gather(x);
    for (tenfold::index_t i = 0; i < all.numel(); ++i) failed |= all[i] != static_cast<double>(i);
    if (grid->rank() == 0) {
      std::printf("consumer_mpi: %d processes, %s\n", grid->size(), failed ? "wrong" : "ok");
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
