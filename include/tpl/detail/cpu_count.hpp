// tpl/detail/cpu_count.hpp — how many CPUs this process may use (internal).
//
// The CPUs of the calling thread's affinity mask (`taskset`, `numactl`, a container's cpuset all
// narrow it), further capped by a cgroup CPU quota (a container's `--cpus`, a Kubernetes CPU limit:
// cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, rounded up, the smallest along
// the process's cgroup and its ancestors). .NET's Environment.ProcessorCount counts the same way.
// std::thread::hardware_concurrency() counts every online CPU of the machine instead, so a pool
// sized by it under `taskset -c 0,1` on a 16-core machine would run 16 workers on 2 CPUs. Falls
// back to hardware_concurrency() where the mask cannot be read; never 0.
//
//   const unsigned cores = tpl::detail::available_cpus();  // 2 under taskset -c 0,1
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tpl::detail {

/// The CPUs the calling thread may use (at least 1). The first call reads /proc and /sys (and
/// allocates); later calls make one system call and allocate nothing.
unsigned available_cpus() noexcept;

/// The CPU limit set by cgroup quotas, or 0 where none applies: `mountinfo` is the text of
/// /proc/self/mountinfo, `self_cgroup` that of /proc/self/cgroup, and `read` returns a file's
/// contents (nullopt when it cannot be read). Separate from available_cpus() for the tests.
unsigned cgroup_cpu_limit(std::string_view mountinfo, std::string_view self_cgroup,
                          const std::function<std::optional<std::string>(const std::string&)>& read) noexcept;

}  // namespace tpl::detail
