// Seed 000's barrier repro: 2 x cores + 1 pool items all block on one barrier, so all of them must
// run at once: the pool has to grow by cores + 1 threads. With a barrier the pool can see
// (std::barrier inside a tpl::blocking_scope: what tpl's own blocking primitives do) threads come at
// once; with a bare std::barrier the pool cannot tell blocking from work and only the starvation gate
// adds threads, one per period, as .NET's portable pool does (8.7 s on 12 cores); the eager policy
// finds them fast (the seed's Windows pool: 0.05 s).
//
//   example_barrier                 # visible and invisible barrier, adaptive and eager policies
//   example_barrier --policy eager
#include <barrier>
#include <thread>

#include "pool_demo_support.hpp"

namespace {

double run_once(const std::string& policy, bool visible, const demo::args& a, std::vector<double>& starts,
                unsigned& threads) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int n = 2 * cores + 1;
  tpl::thread_pool pool(demo::options_for(policy));
  const auto t0 = demo::clock::now();
  demo::start_log log(t0, !a.quiet);
  if (!a.quiet)
    std::printf("policy %s, %s barrier: %d items\n", policy.c_str(), visible ? "cooperating" : "invisible", n);
  std::barrier<> barrier(n);
  std::vector<tpl::task<>> tasks;
  for (int i = 0; i < n; ++i)
    tasks.push_back(tpl::run(pool, [&, i] {
      log.started(i);
      if (visible) {
        tpl::blocking_scope blocking("std::barrier::arrive_and_wait");
        barrier.arrive_and_wait();
      } else {
        barrier.arrive_and_wait();
      }
    }));
  tpl::sync_wait(tpl::when_all(tasks));
  const double total = demo::ms_since(t0);
  starts = log.starts();
  threads = pool.stats().thread_count;
  if (!a.json) {
    std::printf("Done: %.3f ms\n", total);
    demo::print_stats(pool);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const demo::args a = demo::args::parse(argc, argv);
  for (const std::string& policy : a.policies) {
    for (bool visible : {true, false}) {
      std::vector<double> starts;
      unsigned threads = 0;
      const double total = run_once(policy, visible, a, starts, threads);
      if (a.json)
        demo::print_json("barrier", "tpl " + policy + (visible ? " (cooperating barrier)" : " (std::barrier)"), starts,
                         total, threads);
    }
  }
}
