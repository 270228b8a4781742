// A tiny driver for whole-program workloads (bench/workloads/*.cpp).
//
// Every sample runs in a fresh child process (this same executable with --child), so that the
// peak RSS reported is the method's own and one method's heap does not flatter or burden the next.
// Samples are interleaved across methods (A B C A B C ...) so drift on a shared machine hits all
// alike. Each child runs its method once to warm up, then once measured.
//
// Output: one JSON line per method, the format bench/run.py reads.
//
// Single-sample protocol (what `make bench` uses, so that bench/run.py can interleave tpl's
// methods with the peers' programs, see bench/peers/README.md):
//   tpl_wl_X --list                         one line per method: "<group>\t<method>"
//   tpl_wl_X --run <group> <method> [--quick]
//       warms up once at the quick size, then runs once measured and prints one JSON line
//       {"group", "method", "ms", "checksum", "allocated_bytes", "peak_rss_kb"[, "starts_ms"]}
// A method may call tpl_bench::note_start() at the start of each work item (thread-injection
// programs); the offsets from the measured run's start are printed as "starts_ms".
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "alloc_counter.hpp"

namespace tpl_bench {

struct method {
  std::string group;
  std::string name;
  /// Runs the workload once; returns a checksum the driver prints on mismatch.
  std::function<long long(bool quick)> run;
  long long expected;          ///< expected checksum in full mode
  long long expected_quick;    ///< expected checksum in quick mode
};

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

/// Per-item start times of the measured run (see note_start()).
struct start_log {
  std::mutex mu;
  bool on = false;
  std::chrono::steady_clock::time_point t0;
  std::vector<double> ms;
  static start_log& get() {
    static start_log log;
    return log;
  }
};

/// Records "a work item started now" (ms since the measured run began). Thread-safe; a no-op
/// outside the measured run of the single-sample protocol.
inline void note_start() {
  auto& log = start_log::get();
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(log.mu);
  if (log.on) log.ms.push_back(std::chrono::duration<double, std::milli>(now - log.t0).count());
}

/// `--run <group> <method>`: one warm-up at the quick size, one measured sample, one JSON line.
inline int run_single(const method& m, bool quick) {
  if (const long long warm = m.run(true); warm != m.expected_quick) {
    std::fprintf(stderr, "%s / %s: wrong warm-up result %lld (expected %lld)\n", m.group.c_str(),
                 m.name.c_str(), warm, m.expected_quick);
    return 2;
  }
  auto& log = start_log::get();
  {
    std::lock_guard lock(log.mu);
    log.ms.clear();
    log.t0 = std::chrono::steady_clock::now();
    log.on = true;
  }
  const auto a0 = allocated_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  const long long r = m.run(quick);
  const auto t1 = std::chrono::steady_clock::now();
  const auto a1 = allocated_bytes();
  std::string starts;
  {
    std::lock_guard lock(log.mu);
    log.on = false;
    for (double v : log.ms) starts += (starts.empty() ? "" : ", ") + std::to_string(v);
  }
  const long long expect = quick ? m.expected_quick : m.expected;
  if (r != expect) {
    std::fprintf(stderr, "%s / %s: wrong result %lld (expected %lld)\n", m.group.c_str(),
                 m.name.c_str(), r, expect);
    return 2;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "{\"group\": \"%s\", \"method\": \"%s\", \"ms\": %.6f, \"checksum\": %lld, "
      "\"allocated_bytes\": %llu, \"peak_rss_kb\": %ld%s%s%s}\n",
      json_escape(m.group).c_str(), json_escape(m.name).c_str(),
      std::chrono::duration<double, std::milli>(t1 - t0).count(), r,
      static_cast<unsigned long long>(a1 - a0), ru.ru_maxrss, starts.empty() ? "" : ", \"starts_ms\": [",
      starts.c_str(), starts.empty() ? "" : "]");
  std::fflush(stdout);
  return 0;
}

inline int run_child(const method& m, bool quick) {
  long long warm = m.run(quick);
  const long long expect = quick ? m.expected_quick : m.expected;
  if (warm != expect) {
    std::fprintf(stderr, "%s / %s: wrong result %lld (expected %lld)\n", m.group.c_str(),
                 m.name.c_str(), warm, expect);
    return 2;
  }
  const auto a0 = allocated_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  long long r = m.run(quick);
  const auto t1 = std::chrono::steady_clock::now();
  const auto a1 = allocated_bytes();
  if (r != expect) {
    std::fprintf(stderr, "%s / %s: wrong result %lld\n", m.group.c_str(), m.name.c_str(), r);
    return 2;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("SAMPLE %.6f %llu %ld\n", std::chrono::duration<double, std::milli>(t1 - t0).count(),
              static_cast<unsigned long long>(a1 - a0), ru.ru_maxrss);
  std::fflush(stdout);
  return 0;
}

inline int workload_main(int argc, char** argv, const std::vector<method>& methods) {
  bool quick = false;
  int child = -1;
  int reps = 5;
  bool list = false;
  const char* run_group = nullptr;
  const char* run_name = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--list") == 0) list = true;
    else if (std::strcmp(argv[i], "--run") == 0 && i + 2 < argc) {
      run_group = argv[++i];
      run_name = argv[++i];
    }
    else if (std::strcmp(argv[i], "--child") == 0 && i + 1 < argc) child = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::atoi(argv[++i]);
  }
  if (list) {
    for (const auto& m : methods) std::printf("%s\t%s\n", m.group.c_str(), m.name.c_str());
    return 0;
  }
  if (run_group != nullptr) {
    for (const auto& m : methods)
      if (m.group == run_group && m.name == run_name) return run_single(m, quick);
    std::fprintf(stderr, "no method %s / %s\n", run_group, run_name);
    return 2;
  }
  if (child >= 0) return run_child(methods.at(static_cast<std::size_t>(child)), quick);
  if (quick) reps = 2;

  struct result {
    std::vector<double> ms;
    std::vector<unsigned long long> alloc;
    long rss = 0;
    bool failed = false;
  };
  std::vector<result> results(methods.size());
  char self_path[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
  if (len <= 0) {
    std::fprintf(stderr, "cannot resolve /proc/self/exe\n");
    return 1;
  }
  for (int rep = 0; rep < reps; ++rep) {
    for (std::size_t i = 0; i < methods.size(); ++i) {
      if (results[i].failed) continue;
      std::fprintf(stderr, "\r  %s: %s (%d/%d)          ", methods[i].group.c_str(),
                   methods[i].name.c_str(), rep + 1, reps);
      std::string cmd = std::string("'") + self_path + "' --child " + std::to_string(i) + (quick ? " --quick" : "");
      FILE* p = popen(cmd.c_str(), "r");
      char line[512];
      bool got = false;
      while (p != nullptr && std::fgets(line, sizeof line, p) != nullptr) {
        double ms;
        unsigned long long al;
        long rss;
        if (std::sscanf(line, "SAMPLE %lf %llu %ld", &ms, &al, &rss) == 3) {
          results[i].ms.push_back(ms);
          results[i].alloc.push_back(al);
          results[i].rss = std::max(results[i].rss, rss);
          got = true;
        }
      }
      int rc = p != nullptr ? pclose(p) : -1;
      if (!got || rc != 0) results[i].failed = true;
    }
  }
  std::fprintf(stderr, "\r%60s\r", "");
  int status = 0;
  for (std::size_t i = 0; i < methods.size(); ++i) {
    const auto& r = results[i];
    if (r.failed) {
      std::fprintf(stderr, "FAILED: %s / %s\n", methods[i].group.c_str(), methods[i].name.c_str());
      status = 1;
      continue;
    }
    std::string samples;
    for (double v : r.ms) samples += (samples.empty() ? "" : ", ") + std::to_string(v);
    auto alloc = r.alloc;
    std::sort(alloc.begin(), alloc.end());
    std::printf(
        "{\"group\": \"%s\", \"method\": \"%s\", \"samples_ms\": [%s], \"allocated_bytes\": %llu, "
        "\"peak_rss_kb\": %ld}\n",
        json_escape(methods[i].group).c_str(), json_escape(methods[i].name).c_str(), samples.c_str(),
        alloc[alloc.size() / 2], r.rss);
  }
  return status;
}

}  // namespace tpl_bench
