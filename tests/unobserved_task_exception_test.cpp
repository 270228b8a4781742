// on_unobserved_task_exception (.NET TaskScheduler.UnobservedTaskException): raised for a faulted
// task destroyed with its exception unobserved, not for one that was observed or canceled.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace unobserved_task_exception_test_cpp {

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

/// Whether the raise is about the fault `fails(what)` made (other tests' leftovers are ignored).
bool is_about(tpl::unobserved_task_exception_event_args& e, const std::string& what) {
  try {
    std::rethrow_exception(e.exception().inner_exceptions().front());
  } catch (const std::exception& x) {
    return x.what() == what;
  } catch (...) {
  }
  return false;
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

// Unsubscribing waits for a call of the handler under way on another thread: the handler, held
// inside its call until the unsubscribing thread has started its unsubscribe(), must never see
// that unsubscribe() returned. (Without the wait it returned at once, and a handler that captured
// a test's locals ran after they were gone: ASan reported it on a pool thread.)
TEST(unobserved_task_exception, unsubscribing_waits_for_a_call_under_way_on_another_thread) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> entered{false}, release{false}, unsubscribing{false}, returned{false};
    std::atomic<bool> saw_returned{false};
    auto sub = tpl::on_unobserved_task_exception([&](tpl::unobserved_task_exception_event_args& e) {
      if (!is_about(e, "unobserved-5")) return;
      entered = true;
      while (!release) std::this_thread::yield();
      saw_returned = returned.load();
    });
    std::thread raiser([] { auto t = fails("unobserved-5"); });  // the raise runs on this thread
    while (!entered) std::this_thread::yield();
    std::thread unsubscriber([&] {
      unsubscribing = true;
      sub.unsubscribe();
      returned = true;
    });
    while (!unsubscribing) std::this_thread::yield();
    for (int i = 0; i < 1000 && !returned; ++i) std::this_thread::yield();  // room for a wrong return
    EXPECT_FALSE(returned.load()) << "round " << round << ": unsubscribe() returned during the call";
    release = true;
    unsubscriber.join();
    raiser.join();
    EXPECT_TRUE(returned.load());
    EXPECT_FALSE(saw_returned.load()) << "round " << round;
  }
}

// A handler may unsubscribe itself (no wait for its own call) and another handler of the same
// raise, which is then skipped; neither is called again.
TEST(unobserved_task_exception, a_handler_may_unsubscribe_itself_and_a_later_handler) {
  int self_calls = 0, later_calls = 0;
  tpl::unobserved_task_exception_subscription self, later;
  self = tpl::on_unobserved_task_exception([&](tpl::unobserved_task_exception_event_args& e) {
    if (!is_about(e, "unobserved-6")) return;
    ++self_calls;
    later.unsubscribe();
    self.unsubscribe();
  });
  later = tpl::on_unobserved_task_exception([&](tpl::unobserved_task_exception_event_args& e) {
    if (!is_about(e, "unobserved-6")) return;
    ++later_calls;
  });
  { auto t = fails("unobserved-6"); }
  { auto t = fails("unobserved-6"); }
  EXPECT_EQ(self_calls, 1);
  EXPECT_EQ(later_calls, 0);
  EXPECT_FALSE(self.active());
  EXPECT_FALSE(later.active());
}

// Subscriptions come and go while another thread raises the event again and again: a handler is
// never called once its unsubscribe() has returned, so it may capture locals that die right after
// (under ASan a late call is a stack-use-after-scope; here it is also counted).
TEST(unobserved_task_exception, a_handler_is_never_called_after_unsubscribe_returned) {
  std::atomic<bool> stop{false};
  std::atomic<int> late_calls{0};
  std::thread raiser([&] {
    while (!stop) {
      auto t = fails("unobserved-7");
    }
  });
  const int rounds = tpl_test::scaled(2000, 500);
  for (int i = 0; i < rounds; ++i) {
    auto gone = std::make_shared<std::atomic<bool>>(false);
    {
      int local = 0;
      auto sub = tpl::on_unobserved_task_exception([&local, gone, &late_calls](tpl::unobserved_task_exception_event_args&) {
        for (int k = 0; k < 20; ++k) std::this_thread::yield();  // widen the window of a late call
        if (gone->load()) ++late_calls;
        ++local;
      });
      std::this_thread::yield();
    }
    gone->store(true);
    for (int k = 0; k < 20; ++k) std::this_thread::yield();
  }
  stop = true;
  raiser.join();
  EXPECT_EQ(late_calls.load(), 0);
}

}  // namespace unobserved_task_exception_test_cpp
