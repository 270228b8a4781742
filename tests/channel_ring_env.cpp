// Lets ctest run the channel tests a second time with every channel on its lock-free ring from
// the first write (TPL_TEST_CHANNEL_RING_WARMUP=0), instead of after the warm-up writes a channel
// normally takes under its lock (see detail::channel_fast_ring_warmup).
#include <cstdlib>
#include <string>

#include <tpl/channel.hpp>

namespace channel_ring_env_cpp {

namespace {
const bool ring_warmup_from_environment = [] {
  if (const char* v = std::getenv("TPL_TEST_CHANNEL_RING_WARMUP"))
    tpl::detail::channel_fast_ring_warmup.store(static_cast<std::uint32_t>(std::stoul(v)), std::memory_order_relaxed);
  return true;
}();
}  // namespace

}  // namespace channel_ring_env_cpp
