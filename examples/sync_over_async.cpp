// Seed 000's sync-over-async repro: 4 x cores pool items each block on one unfinished task
// (task::wait(), which tells the pool it blocks); one more item completes it. Every item must be
// running at once before the last one can run, so the pool has to add threads while the others
// block. Prints when each item started, as the seed does, and the total.
//
//   example_sync_over_async                          # adaptive, then eager
//   example_sync_over_async --policy no-cooperation  # .NET 5: starvation gate only (slow)
//
// .NET 5 took 32.5 s for this on 12 cores; .NET 6 (cooperative blocking) 1.36 s.
#include <thread>

#include "pool_demo_support.hpp"

int main(int argc, char** argv) {
  const demo::args a = demo::args::parse(argc, argv);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const std::string& policy : a.policies) {
    tpl::thread_pool pool(demo::options_for(policy));
    const auto t0 = demo::clock::now();
    demo::start_log log(t0, !a.quiet);
    if (!a.quiet) std::printf("policy %s: %d items block on one task, one more completes it\n", policy.c_str(), 4 * cores);
    tpl::task_completion_source<> tcs;
    std::vector<tpl::task<>> tasks;
    for (int i = 0; i < 4 * cores; ++i)
      tasks.push_back(tpl::run(pool, [&log, &tcs, i] {
        log.started(i);
        tcs.get_task().wait();
      }));
    tasks.push_back(tpl::run(pool, [&tcs] { tcs.set_result(); }));
    tpl::sync_wait(tpl::when_all(tasks));
    const double total = demo::ms_since(t0);
    if (a.json) {
      demo::print_json("sync_over_async", "tpl " + policy, log.starts(), total, pool.stats().thread_count);
    } else {
      std::printf("Done: %.3f ms\n", total);
      demo::print_stats(pool);
    }
  }
}
