// A tiny driver for whole-program workloads (bench/workloads/*.cpp).
//
// Every sample runs in a fresh child process (this same executable with --child), so that the
// peak RSS reported is the method's own and one method's heap does not flatter or burden the next.
// Samples are interleaved across methods (A B C A B C ...) so drift on a shared machine hits all
// alike. Each child runs its method once to warm up, then once measured.
//
// Output: one JSON line per method, the format bench/run.py reads.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--child") == 0 && i + 1 < argc) child = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::atoi(argv[++i]);
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
