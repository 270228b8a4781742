// tpl::testing::deterministic_scheduler: see tpl/testing/deterministic_scheduler.hpp.
#include "tpl/testing/deterministic_scheduler.hpp"

#include <cstdlib>
#include <exception>

namespace tpl::testing {

namespace {

// Makes s the thread's current scheduler for a scope (for timer callbacks fired by fake time).
class current_scope {
 public:
  explicit current_scope(scheduler* s) noexcept : previous_(detail::t_current_scheduler) {
    detail::t_current_scheduler = s;
  }
  ~current_scope() { detail::t_current_scheduler = previous_; }
  current_scope(const current_scope&) = delete;
  current_scope& operator=(const current_scope&) = delete;

 private:
  scheduler* previous_;
};

// Marks the scheduler as running for a scope; refuses nested runs.
class running_scope {
 public:
  explicit running_scope(bool& flag) : flag_(flag) {
    if (flag_) throw std::logic_error("deterministic_scheduler: run_one/run_until_idle called from inside an item");
    flag_ = true;
  }
  ~running_scope() { flag_ = false; }
  running_scope(const running_scope&) = delete;
  running_scope& operator=(const running_scope&) = delete;

 private:
  bool& flag_;
};

std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "a non-std exception";
  }
}

}  // namespace

deterministic_scheduler::deterministic_scheduler(std::uint64_t seed)
    : seed_(seed), state_(seed), own_clock_(std::make_unique<fake_time_provider>()), clock_(own_clock_.get()) {}

deterministic_scheduler::deterministic_scheduler(std::uint64_t seed, fake_time_provider& clock)
    : seed_(seed), state_(seed), clock_(&clock) {}

deterministic_scheduler::~deterministic_scheduler() {
  // Items that never ran hold coroutine frames: run them so that they reach their end (or their
  // next suspension, whose owner then releases them). Time does not move any more.
  if (running_) return;
  try {
    while (run_one()) {
    }
  } catch (...) {
    // run_one only throws for nested runs, excluded above.
  }
}

std::uint64_t deterministic_scheduler::next() {
  // splitmix64: fixed, portable output for a seed (std distributions differ between libraries).
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t deterministic_scheduler::random(std::uint64_t bound) {
  if (bound == 0) throw std::invalid_argument("deterministic_scheduler::random: bound must be positive");
  std::lock_guard g(mutex_);
  return next() % bound;
}

void deterministic_scheduler::schedule(std::coroutine_handle<> h) {
  std::lock_guard g(mutex_);
  ready_.push_back(h);
}

void deterministic_scheduler::schedule_after_others(std::coroutine_handle<> h) { schedule(h); }

void deterministic_scheduler::on_blocking_call(const char* what) {
  std::string message = std::string(what != nullptr ? what : "a blocking call") +
                        " inside tpl::testing::deterministic_scheduler would deadlock: every item runs on one "
                        "thread, so nothing else can run while it blocks (co_await instead)";
  {
    std::lock_guard g(mutex_);
    blocking_calls_.push_back(message);
  }
  throw blocking_call_error(message);
}

bool deterministic_scheduler::run_one() {
  running_scope r(running_);
  std::coroutine_handle<> h;
  {
    std::lock_guard g(mutex_);
    if (ready_.empty()) return false;
    const std::size_t i = static_cast<std::size_t>(next() % ready_.size());
    h = ready_[i];
    ready_[i] = ready_.back();
    ready_.pop_back();
    ++items_run_;
  }
  run(h);
  return true;
}

bool deterministic_scheduler::advance_to_next_timer() {
  std::chrono::system_clock::time_point due;
  if (!clock_->next_due(due)) return false;
  current_scope c(this);
  if (due > clock_->utc_now()) {
    clock_->set_utc_now(due);
  } else {
    clock_->advance(std::chrono::nanoseconds(0));  // already due: fire it
  }
  return true;
}

std::size_t deterministic_scheduler::run_until_idle(std::size_t max_items) {
  std::size_t n = 0;
  for (;;) {
    while (run_one()) {
      if (++n >= max_items)
        throw std::runtime_error("deterministic_scheduler: still running after " + std::to_string(max_items) +
                                 " items (seed " + std::to_string(seed_) + "): a livelock?");
    }
    if (!advance_to_next_timer()) return n;
  }
}

std::size_t deterministic_scheduler::ready_count() const {
  std::lock_guard g(mutex_);
  return ready_.size();
}

std::vector<std::string> deterministic_scheduler::blocking_calls() const {
  std::lock_guard g(mutex_);
  return blocking_calls_;
}

seed_report for_each_seed_impl(std::size_t n, const std::function<bool(deterministic_scheduler&)>& scenario) {
  seed_report report;
  std::uint64_t first = 1;
  std::uint64_t last = n;
  if (const char* env = std::getenv("TPL_TEST_SEED"); env != nullptr && *env != 0) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (end == nullptr || *end != 0) throw std::invalid_argument(std::string("TPL_TEST_SEED is not a number: ") + env);
    first = last = v;
  }
  for (std::uint64_t seed = first; seed <= last && seed >= first; ++seed) {
    ++report.runs;
    std::string failure;
    {
      deterministic_scheduler s(seed);
      try {
        if (!scenario(s)) failure = "the scenario returned false";
      } catch (...) {
        failure = "the scenario threw: " + describe(std::current_exception());
      }
      const auto blocking = s.blocking_calls();
      if (failure.empty() && !blocking.empty()) failure = "a blocking call inside the scheduler: " + blocking.front();
    }
    if (!failure.empty()) {
      report.ok = false;
      report.seed = seed;
      report.message = "failed for seed " + std::to_string(seed) + " (after " + std::to_string(report.runs) +
                       " run(s)): " + failure + "; replay it alone with TPL_TEST_SEED=" + std::to_string(seed);
      return report;
    }
    if (seed == last) break;
  }
  return report;
}

}  // namespace tpl::testing
