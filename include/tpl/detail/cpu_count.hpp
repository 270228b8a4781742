// tpl/detail/cpu_count.hpp — how many CPUs this process may run on (internal).
//
// The CPUs of the calling thread's affinity mask (`taskset`, `numactl`, a container's cpuset all
// narrow it), as .NET's Environment.ProcessorCount and Go's GOMAXPROCS default count them;
// std::thread::hardware_concurrency() counts every online CPU of the machine instead, so a pool
// sized by it under `taskset -c 0,1` on a 16-core machine would run 16 workers on 2 cores.
// Falls back to hardware_concurrency() where the mask cannot be read; never 0.
//
//   const unsigned cores = tpl::detail::available_cpus();  // 2 under taskset -c 0,1
#pragma once

namespace tpl::detail {

/// The CPUs the calling thread may run on (at least 1). A system call: cache the answer.
unsigned available_cpus() noexcept;

}  // namespace tpl::detail
