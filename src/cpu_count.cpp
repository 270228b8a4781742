// available_cpus() and cgroup_cpu_limit() (tpl/detail/cpu_count.hpp).
//
// Invariants: available_cpus() is at least 1 and at most the affinity mask's count (or, without a
// readable mask, hardware_concurrency()); a cgroup quota only ever lowers it. Anything unreadable
// or malformed in /proc or /sys means "no limit", never an error: the pool must start anyway. The
// quota is read once per process; the mask on every call (it is per thread, and cheap: one system
// call, no allocation).
#include "tpl/detail/cpu_count.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace tpl::detail {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::optional<long long> to_number(std::string_view s) {
  s = trim(s);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// A cgroup hierarchy's mount: where it is mounted and which of its paths that mount shows.
struct hierarchy {
  std::string mount_point;
  std::string root;
  bool found = false;
};

/// The cgroup v2 mount and the v1 mount with the cpu controller, from /proc/self/mountinfo:
/// "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS".
void find_hierarchies(std::string_view mountinfo, hierarchy& v2, hierarchy& v1_cpu) {
  for (std::string_view line : split(mountinfo, '\n')) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> head = split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> tail = split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    if (tail[0] == "cgroup2" && !v2.found) {
      v2 = {std::string(head[4]), std::string(head[3]), true};
    } else if (tail[0] == "cgroup" && !v1_cpu.found) {
      for (std::string_view opt : split(trim(tail[2]), ','))
        if (opt == "cpu") v1_cpu = {std::string(head[4]), std::string(head[3]), true};
    }
  }
}

/// The process's path in the v2 hierarchy ("0::PATH") and in the v1 hierarchy with cpu
/// ("N:...,cpu,...:PATH"), from /proc/self/cgroup.
void find_paths(std::string_view self_cgroup, std::string& v2_path, std::string& v1_cpu_path) {
  for (std::string_view line : split(self_cgroup, '\n')) {
    const std::size_t a = line.find(':');
    const std::size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string_view path = trim(line.substr(b + 1));
    if (line.substr(0, a) == "0" && controllers.empty()) {
      v2_path = std::string(path);
      continue;
    }
    for (std::string_view c : split(controllers, ','))
      if (c == "cpu") v1_cpu_path = std::string(path);
  }
}

/// The directories from the process's cgroup up to the hierarchy's root, as mounted.
std::vector<std::string> cgroup_dirs(const hierarchy& h, const std::string& path) {
  std::vector<std::string> dirs;
  // Not visible through this mount unless the path is the mount's root or below it.
  if (path.empty() || path.compare(0, h.root.size(), h.root) != 0) return dirs;
  if (h.root != "/" && path.size() > h.root.size() && path[h.root.size()] != '/') return dirs;
  std::string rel = path.substr(h.root == "/" ? 0 : h.root.size());
  for (;;) {
    while (rel.size() > 1 && rel.back() == '/') rel.pop_back();
    dirs.push_back(h.mount_point + (rel == "/" ? "" : rel));
    if (rel.empty() || rel == "/") return dirs;
    const std::size_t slash = rel.rfind('/');
    rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
  }
}

unsigned ceil_cpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  const long long n = (quota + period - 1) / period;
  return static_cast<unsigned>(std::clamp<long long>(n, 1, 1 << 20));
}

std::optional<std::string> read_whole_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

unsigned cgroup_cpu_limit(std::string_view mountinfo, std::string_view self_cgroup,
                          const std::function<std::optional<std::string>(const std::string&)>& read) noexcept {
  try {
    hierarchy v2, v1;
    find_hierarchies(mountinfo, v2, v1);
    std::string v2_path, v1_path;
    find_paths(self_cgroup, v2_path, v1_path);
    unsigned limit = 0;
    auto lower = [&limit](unsigned n) {
      if (n != 0 && (limit == 0 || n < limit)) limit = n;
    };
    if (v2.found) {
      for (const std::string& dir : cgroup_dirs(v2, v2_path)) {
        // "max 100000" (no limit) or "QUOTA PERIOD", in microseconds.
        const std::optional<std::string> text = read(dir + "/cpu.max");
        if (!text) continue;
        const std::vector<std::string_view> f = split(trim(*text), ' ');
        if (f.size() != 2 || f[0] == "max") continue;
        const auto q = to_number(f[0]), p = to_number(f[1]);
        if (q && p) lower(ceil_cpus(*q, *p));
      }
    }
    if (v1.found) {
      for (const std::string& dir : cgroup_dirs(v1, v1_path)) {
        const std::optional<std::string> q = read(dir + "/cpu.cfs_quota_us");
        const std::optional<std::string> p = read(dir + "/cpu.cfs_period_us");
        if (!q || !p) continue;
        const auto qn = to_number(*q), pn = to_number(*p);  // quota -1: no limit
        if (qn && pn) lower(ceil_cpus(*qn, *pn));
      }
    }
    return limit;
  } catch (...) {  // std::bad_alloc while parsing: no limit rather than no pool
    return 0;
  }
}

namespace {
/// The quota of this process's cgroups, read once (as .NET reads it at start-up): reading it
/// allocates, and available_cpus() is also called from paths that must not (a spin's first use
/// inside a measured loop), so only the first call pays.
unsigned process_cgroup_cpu_limit() noexcept {
#if defined(__linux__)
  static const unsigned limit = []() noexcept -> unsigned {
    try {
      const std::optional<std::string> mountinfo = read_whole_file("/proc/self/mountinfo");
      const std::optional<std::string> self_cgroup = read_whole_file("/proc/self/cgroup");
      if (!mountinfo || !self_cgroup) return 0;
      return cgroup_cpu_limit(*mountinfo, *self_cgroup, read_whole_file);
    } catch (...) {  // std::bad_alloc reading /proc: no limit
      return 0;
    }
  }();
  return limit;
#else
  return 0;
#endif
}
}  // namespace

unsigned available_cpus() noexcept {
  unsigned n = 0;
#if defined(__linux__)
  // A mask for up to 1,024 CPUs first; a larger machine makes sched_getaffinity fail with EINVAL,
  // and a mask sized for 32,768 CPUs is tried once more.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    n = static_cast<unsigned>(std::max(0, CPU_COUNT(&set)));
  } else {
    constexpr int kMany = 32768;
    const std::size_t bytes = CPU_ALLOC_SIZE(kMany);
    cpu_set_t* big = CPU_ALLOC(kMany);
    if (big != nullptr) {
      CPU_ZERO_S(bytes, big);
      if (sched_getaffinity(0, bytes, big) == 0) n = static_cast<unsigned>(std::max(0, CPU_COUNT_S(bytes, big)));
      CPU_FREE(big);
    }
  }
#endif
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  const unsigned quota = process_cgroup_cpu_limit();
  if (quota != 0 && quota < n) n = quota;
  return n;
}

}  // namespace tpl::detail
