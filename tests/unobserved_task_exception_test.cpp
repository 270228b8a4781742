// on_unobserved_task_exception (.NET TaskScheduler.UnobservedTaskException): raised for a faulted
// task destroyed with its exception unobserved, not for one that was observed or canceled.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace {

// Records the messages of unobserved faults whose message starts with `prefix` (other tests'
// tasks may be released on pool threads meanwhile: they are ignored).
class recorder {
 public:
  explicit recorder(std::string prefix)
      : prefix_(std::move(prefix)),
        subscription_(tpl::on_unobserved_task_exception([this](tpl::unobserved_task_exception_event_args& e) {
          for (const auto& inner : e.exception().inner_exceptions()) {
            try {
              std::rethrow_exception(inner);
            } catch (const std::exception& x) {
              const std::string what = x.what();
              if (what.rfind(prefix_, 0) == 0) {
                std::lock_guard g(mutex_);
                seen_.push_back(what);
              }
            }
          }
        })) {}
  std::vector<std::string> seen() const {
    std::lock_guard g(mutex_);
    return seen_;
  }
  tpl::unobserved_task_exception_subscription& subscription() { return subscription_; }

 private:
  std::string prefix_;
  mutable std::mutex mutex_;
  std::vector<std::string> seen_;
  tpl::unobserved_task_exception_subscription subscription_;
};

tpl::task<int> fails(std::string what) {
  co_await tpl::completed_task();
  throw std::runtime_error(what);
}

}  // namespace

TEST(unobserved_task_exception, a_dropped_faulted_task_raises_the_event_with_its_exception) {
  recorder r("unobserved-1");
  { auto t = fails("unobserved-1: dropped"); }
  EXPECT_EQ(r.seen(), std::vector<std::string>{"unobserved-1: dropped"});
  { auto t = tpl::task_from_exception<void>(std::make_exception_ptr(std::logic_error("unobserved-1: from_exception"))); }
  EXPECT_EQ(r.seen().size(), 2u);
}

TEST(unobserved_task_exception, observing_the_exception_in_any_way_prevents_it) {
  recorder r("unobserved-2");
  {
    auto t = fails("unobserved-2: awaited");
    auto awaiter = [&]() -> tpl::task<> {
      try {
        (void)co_await t;
      } catch (const std::runtime_error&) {
      }
    }();
  }
  {
    auto t = fails("unobserved-2: waited");
    EXPECT_THROW(t.wait(), tpl::aggregate_exception);
  }
  {
    auto t = fails("unobserved-2: get");
    EXPECT_THROW((void)t.get(), tpl::aggregate_exception);
  }
  {
    auto t = fails("unobserved-2: exception()");
    EXPECT_NE(t.exception(), nullptr);
  }
  {
    auto t = fails("unobserved-2: sync_wait");
    EXPECT_THROW((void)tpl::sync_wait(t), std::runtime_error);
  }
  {
    auto child = fails("unobserved-2: when_all child");
    auto all = tpl::when_all(std::vector<tpl::task<int>>{child});
    EXPECT_THROW(all.wait(), tpl::aggregate_exception);
  }
  {
    auto t = fails("unobserved-2: wait_all");
    std::vector<tpl::task<int>> v{t};
    EXPECT_THROW(tpl::wait_all(v), tpl::aggregate_exception);
  }
  EXPECT_TRUE(r.seen().empty()) << r.seen().front();
  { auto t = fails("unobserved-2: control"); }  // the recorder works: this one is reported
  EXPECT_EQ(r.seen().size(), 1u);
}

TEST(unobserved_task_exception, canceled_tasks_do_not_raise_it) {
  std::atomic<int> raised{0};
  auto sub = tpl::on_unobserved_task_exception([&](tpl::unobserved_task_exception_event_args& e) {
    for (const auto& inner : e.exception().inner_exceptions()) {
      try {
        std::rethrow_exception(inner);
      } catch (const tpl::operation_canceled&) {
        ++raised;
      } catch (...) {
      }
    }
  });
  { auto t = tpl::task_from_canceled<int>(); }
  {
    auto t = []() -> tpl::task<> {
      co_await tpl::completed_task();
      throw tpl::operation_canceled();
    }();
    EXPECT_TRUE(t.is_canceled());
  }
  EXPECT_EQ(raised.load(), 0);
}

TEST(unobserved_task_exception, unsubscribing_stops_the_handler) {
  recorder r("unobserved-3");
  { auto t = fails("unobserved-3: while subscribed"); }
  r.subscription().unsubscribe();
  EXPECT_FALSE(r.subscription().active());
  { auto t = fails("unobserved-3: after unsubscribe"); }
  EXPECT_EQ(r.seen(), std::vector<std::string>{"unobserved-3: while subscribed"});
}

TEST(unobserved_task_exception, handlers_run_in_order_see_set_observed_and_survive_a_throwing_one) {
  std::vector<std::string> calls;
  std::mutex m;
  auto is_ours = [](tpl::unobserved_task_exception_event_args& e) {
    try {
      std::rethrow_exception(e.exception().inner_exceptions().front());
    } catch (const std::exception& x) {
      return std::string(x.what()) == "unobserved-4";
    }
  };
  auto first = tpl::on_unobserved_task_exception([&](tpl::unobserved_task_exception_event_args& e) {
    if (!is_ours(e)) return;
    std::lock_guard g(m);
    calls.push_back("first");
    e.set_observed();
    throw std::runtime_error("a handler that throws");
  });
  auto second = tpl::on_unobserved_task_exception([&](tpl::unobserved_task_exception_event_args& e) {
    if (!is_ours(e)) return;
    std::lock_guard g(m);
    calls.push_back(e.observed() ? "second saw observed" : "second");
  });
  { auto t = fails("unobserved-4"); }
  EXPECT_EQ(calls, (std::vector<std::string>{"first", "second saw observed"}));
  EXPECT_THROW((void)tpl::on_unobserved_task_exception({}), std::invalid_argument);
}
