// tpl/tpl.hpp — everything tpl provides, in one include.
//
//   #include <tpl/tpl.hpp>
//
//   tpl::task<int> answer() { co_await tpl::yield(); co_return 42; }
//   int main() { return tpl::sync_wait(answer()) == 42 ? 0 : 1; }
#pragma once

#include "tpl/exceptions.hpp"
#include "tpl/run.hpp"
#include "tpl/scheduler.hpp"
#include "tpl/sync_wait.hpp"
#include "tpl/task.hpp"
#include "tpl/task_completion_source.hpp"
#include "tpl/thread_pool.hpp"
#include "tpl/dedicated_thread_scheduler.hpp"
#include "tpl/task_factory.hpp"
#include "tpl/async_local.hpp"
#include "tpl/value_task.hpp"
#include "tpl/when_all.hpp"
#include "tpl/when_any.hpp"
#include "tpl/cancellation.hpp"
#include "tpl/time_provider.hpp"
#include "tpl/periodic_timer.hpp"
#include "tpl/testing/deterministic_scheduler.hpp"
#include "tpl/testing/fake_time_provider.hpp"
#include "tpl/wait_async.hpp"
#include "tpl/sync/async_semaphore.hpp"
#include "tpl/parallel.hpp"
#include "tpl/sync/async_mutex.hpp"
#include "tpl/sync/async_event.hpp"
#include "tpl/sync/async_countdown_event.hpp"
#include "tpl/sync/async_barrier.hpp"
#include "tpl/sync/barrier.hpp"
#include "tpl/sync/countdown_event.hpp"
#include "tpl/sync/manual_reset_event_slim.hpp"
#include "tpl/sync/reader_writer_lock.hpp"
#include "tpl/sync/spin_wait.hpp"
#include "tpl/channel.hpp"
#include "tpl/async_generator.hpp"
#include "tpl/when_each.hpp"
#include "tpl/concurrent_exclusive_scheduler_pair.hpp"
#include "tpl/value_task_source.hpp"
#include "tpl/wait_all.hpp"
