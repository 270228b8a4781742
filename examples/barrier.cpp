// Seed 000's barrier repro: 2 x cores + 1 pool items all block on one barrier, so all of them must
// run at once: the pool has to grow by cores + 1 threads. With tpl::barrier, which tells the pool it
// blocks (as tpl's blocking primitives all do), threads come at once; with a bare std::barrier the
// pool cannot tell blocking from work and only the starvation gate adds threads, one per period, as
// .NET's portable pool does (8.7 s on 12 cores); the eager policy finds them fast (the seed's Windows
// pool: 0.05 s).
//
//   example_barrier                 # visible and invisible barrier, adaptive and eager policies
//   example_barrier --policy eager --barrier std
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
    std::printf("policy %s, %s: %d items\n", policy.c_str(), visible ? "tpl::barrier" : "std::barrier", n);
  tpl::barrier visible_barrier(n);
  std::barrier<> std_barrier(n);
  std::vector<tpl::task<>> tasks;
  for (int i = 0; i < n; ++i)
    tasks.push_back(tpl::run(pool, [&, i] {
      log.started(i);
      if (visible)
        visible_barrier.signal_and_wait();
      else
        std_barrier.arrive_and_wait();
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
  // --barrier cooperating|std: only that kind (default: both).
  std::vector<bool> kinds{true, false};
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--barrier" && i + 1 < argc) {
      const std::string k = argv[++i];
      if (k != "cooperating" && k != "std") {
        std::fprintf(stderr, "--barrier cooperating|std\n");
        return 2;
      }
      kinds = {k == "cooperating"};
    } else {
      rest.push_back(argv[i]);
    }
  }
  const demo::args a = demo::args::parse(static_cast<int>(rest.size()), rest.data());
  for (const std::string& policy : a.policies) {
    for (bool visible : kinds) {
      std::vector<double> starts;
      unsigned threads = 0;
      const double total = run_once(policy, visible, a, starts, threads);
      if (a.json)
        demo::print_json("barrier", "tpl " + policy + (visible ? " (tpl::barrier)" : " (std::barrier)"), starts,
                         total, threads);
    }
  }
}
