// A process that exits right after its first parallel loop, while the pool's workers may
// still be starting (run by Threads.ProcessMayExitWhileWorkersStart).
#include "core/thread_pool.hpp"
#include "tenfold/threads.hpp"

int main() {
  tenfold::set_num_threads(16);
  tenfold::detail::parallel_for(2, [](tenfold::index_t) {});
  return 0;
}
