// Shared driver of the C++ peers (Asio, oneTBB): the protocol of bench/peers/README.md.
//   peer --list                             one "<group>\t<method>" line per method
//   peer --run <group> <method> [--quick]   warm-up at the quick size, one measured run,
//                                           one JSON line on stdout
//   peer --serve <kind> <method>            a server of a server group: listens on 127.0.0.1 (a
//                                           port the kernel picks), prints "listening on
//                                           127.0.0.1:PORT", serves until killed
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace peer {

inline std::atomic<unsigned long long> g_allocated{0};

struct recorder {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::mutex mu;
  std::vector<double> starts;
  void start() {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard lock(mu);
    starts.push_back(ms);
  }
};

struct method {
  std::string group, name;
  std::function<long long(bool quick, recorder& rec)> run;
  bool no_warmup = false;
};

/// A server of a server group (bench/peers/README.md): `serve` listens, prints its line and
/// serves until the process is killed.
struct server {
  std::string kind, name;
  std::function<int()> serve;
};

inline int pick(bool quick, int full, int small) { return quick ? small : full; }

inline int main(int argc, char** argv, const std::vector<method>& methods,
                const std::vector<server>& servers = {}) {
  bool quick = false, list = false, serving = false;
  const char* group = nullptr;
  const char* name = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--list") == 0) list = true;
    else if ((std::strcmp(argv[i], "--run") == 0 || std::strcmp(argv[i], "--serve") == 0) && i + 2 < argc) {
      serving = std::strcmp(argv[i], "--serve") == 0;
      group = argv[++i];
      name = argv[++i];
    }
  }
  if (list) {
    for (const auto& m : methods) std::printf("%s\t%s\n", m.group.c_str(), m.name.c_str());
    for (const auto& s : servers) std::printf("%s\t%s\n", s.kind.c_str(), s.name.c_str());
    return 0;
  }
  if (serving) {
    for (const auto& s : servers)
      if (s.kind == group && s.name == name) return s.serve();
    std::fprintf(stderr, "no server %s / %s\n", group, name);
    return 2;
  }
  for (const auto& m : methods) {
    if (group == nullptr || m.group != group || m.name != name) continue;
    if (!m.no_warmup) {
      recorder warm;
      m.run(true, warm);
    }
    const auto a0 = g_allocated.load();
    recorder rec;
    const auto t0 = std::chrono::steady_clock::now();
    const long long sum = m.run(quick, rec);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const auto a1 = g_allocated.load();
    std::string starts;
    for (double v : rec.starts) starts += (starts.empty() ? "" : ", ") + std::to_string(v);
#ifdef PEER_NO_ALLOC_COUNT
    const std::string alloc = "null";
    (void)a0;
    (void)a1;
#else
    const std::string alloc = std::to_string(a1 - a0);
#endif
    std::printf("{\"group\": \"%s\", \"method\": \"%s\", \"ms\": %.6f, \"checksum\": %lld, \"allocated_bytes\": %s%s%s%s}\n",
                m.group.c_str(), m.name.c_str(), ms, sum, alloc.c_str(), starts.empty() ? "" : ", \"starts_ms\": [",
                starts.c_str(), starts.empty() ? "" : "]");
    std::fflush(stdout);
    std::_Exit(0);
  }
  std::fprintf(stderr, "no method %s / %s\n", group ? group : "?", name ? name : "?");
  return 2;
}

}  // namespace peer

// Counting global operator new (as tpl's own benchmarks do). oneTBB allocates its tasks with its
// own allocator, so its peer defines PEER_NO_ALLOC_COUNT and reports no figure.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  peer::g_allocated.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
