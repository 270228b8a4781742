// tpl::io pipes: end of stream, write-all across short writes, a child's stdout, cancel and close
// of a pending read or write, EPIPE without SIGPIPE, and io_uring's shutdown with a read pending.
// Each test runs on the pool engine (pipes on the socket engine's readiness, and on the poll(2)
// path of kernels without RWF_NOWAIT on pipes) and on io_uring (its ring, by default and with the
// files' fast paths off). A pending operation is observed through the engine's count of waiting
// operations (a handshake, never a sleep).
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "io_test_support.hpp"

extern char** environ;

namespace io_pipe_test_cpp {

namespace {

using namespace tpl_test;
using tpl::io::create_pipe;
using tpl::io::pipe_stream;

using io_pipe = io_engine_test;

tpl::task<std::string> read_to_end(pipe_stream& reader, std::size_t chunk) {
  std::string all;
  std::vector<std::byte> buf(chunk);
  while (const std::size_t n = co_await reader.read_async(buf)) all += string_of(std::span(buf).first(n));
  co_return all;
}

TEST_P(io_pipe, read_returns_what_was_written_then_zero_once_the_writer_closed) {
  auto [reader, writer] = create_pipe();
  EXPECT_EQ(tpl::sync_wait(writer.write_async(bytes_of("hello"))), 5u);
  writer.close();
  EXPECT_EQ(tpl::sync_wait(read_to_end(reader, 3)), "hello");
  std::byte b[4];
  EXPECT_EQ(tpl::sync_wait(reader.read_async(b)), 0u) << "end of stream stays the end";
}

TEST_P(io_pipe, a_write_larger_than_the_pipe_is_written_whole_across_short_writes) {
  auto [reader, writer] = create_pipe();
  const auto data = pattern(0, 1u << 20);  // 16 times the default pipe capacity
  tpl::task<std::string> drained = tpl::run([&reader = reader] { return read_to_end(reader, 1000); });
  EXPECT_EQ(tpl::sync_wait(writer.write_async(data)), data.size());
  writer.close();
  const std::string got = tpl::sync_wait(drained);
  ASSERT_EQ(got.size(), data.size());
  EXPECT_EQ(got, string_of(data));
}

TEST_P(io_pipe, reads_a_child_processes_stdout_to_the_end) {
  auto [reader, writer] = create_pipe();
  posix_spawn_file_actions_t actions;
  ASSERT_EQ(posix_spawn_file_actions_init(&actions), 0);
  ASSERT_EQ(posix_spawn_file_actions_adddup2(&actions, writer.native_handle(), STDOUT_FILENO), 0);
  char sh[] = "/bin/sh", dash_c[] = "-c", script[] = "echo hello; i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done";
  char* argv[] = {sh, dash_c, script, nullptr};
  pid_t child = -1;
  const int spawned = posix_spawn(&child, "/bin/sh", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ASSERT_EQ(spawned, 0);
  writer.close();  // the child's copy is now the only write end: its exit ends the stream
  const std::string out = tpl::sync_wait(read_to_end(reader, 64));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string expected = "hello\n";
  for (int i = 0; i < 200; ++i) expected += "line" + std::to_string(i) + "\n";
  EXPECT_EQ(out, expected);
}

TEST_P(io_pipe, canceling_a_pending_read_loses_no_byte) {
  auto [reader, writer] = create_pipe();
  tpl::cancellation_token_source cts;
  std::byte buf[16];
  const std::size_t waiting_before = engine().operations_waiting();
  auto pending = reader.read_async(buf, cts.token());
  ASSERT_TRUE(wait_until([&] { return engine().operations_waiting() > waiting_before; }, "the read is pending"));
  cts.cancel();
  EXPECT_THROW(tpl::sync_wait(std::move(pending)), tpl::operation_canceled);
  (void)tpl::sync_wait(writer.write_async(bytes_of("after")));
  writer.close();
  EXPECT_EQ(tpl::sync_wait(read_to_end(reader, 16)), "after");
}

TEST_P(io_pipe, closing_a_stream_aborts_its_pending_read) {
  auto [reader, writer] = create_pipe();
  std::byte buf[16];
  const std::size_t waiting_before = engine().operations_waiting();
  auto pending = reader.read_async(buf);
  ASSERT_TRUE(wait_until([&] { return engine().operations_waiting() > waiting_before; }, "the read is pending"));
  reader.close();
  try {
    (void)tpl::sync_wait(std::move(pending));
    ADD_FAILURE() << "the pending read completed after close";
  } catch (const tpl::io::operation_aborted& e) {
    EXPECT_EQ(e.code(), std::errc::operation_canceled);
  }
  EXPECT_THROW((void)reader.read_async(buf), tpl::invalid_operation);
}

TEST_P(io_pipe, canceling_a_pending_write_reports_the_bytes_already_written) {
  auto [reader, writer] = create_pipe();
  tpl::cancellation_token_source cts;
  const auto data = pattern(0, 1u << 20);  // nobody reads: the pipe fills, the write waits
  const std::size_t waiting_before = engine().operations_waiting();
  auto pending = writer.write_async(data, cts.token());
  ASSERT_TRUE(wait_until([&] { return engine().operations_waiting() > waiting_before; }, "the write is pending"));
  int in_pipe = 0;
  ASSERT_TRUE(wait_until([&] { return ::ioctl(reader.native_handle(), FIONREAD, &in_pipe) == 0 && in_pipe > 0; },
                         "the pipe holds the first bytes"));
  cts.cancel();
  try {
    (void)tpl::sync_wait(std::move(pending));
    ADD_FAILURE() << "a write into a full pipe completed";
  } catch (const tpl::io::io_canceled& e) {
    ASSERT_EQ(::ioctl(reader.native_handle(), FIONREAD, &in_pipe), 0);
    EXPECT_GT(e.bytes_transferred(), 0u);
    EXPECT_EQ(e.bytes_transferred(), static_cast<std::size_t>(in_pipe)) << "what the pipe holds is what was written";
  } catch (const tpl::operation_canceled&) {
    ADD_FAILURE() << "canceled without reporting the bytes written";
  }
}

TEST_P(io_pipe, writing_to_a_pipe_whose_reader_closed_throws_epipe_and_the_process_lives) {
  auto [reader, writer] = create_pipe();
  reader.close();
  try {
    (void)tpl::sync_wait(writer.write_async(bytes_of("nobody listens")));
    ADD_FAILURE() << "a write to a pipe with no reader succeeded";
  } catch (const tpl::io::io_error& e) {
    EXPECT_EQ(e.code(), std::error_code(EPIPE, std::system_category()));
  }
}

TEST_P(io_pipe, destroying_a_stream_with_a_read_pending_aborts_the_read) {
  auto pipe = create_pipe();
  auto reader = std::make_unique<pipe_stream>(std::move(pipe.first));
  std::byte buf[4];
  const std::size_t waiting_before = engine().operations_waiting();
  auto pending = reader->read_async(buf);
  ASSERT_TRUE(wait_until([&] { return engine().operations_waiting() > waiting_before; }, "the read is pending"));
  reader.reset();
  EXPECT_THROW((void)tpl::sync_wait(std::move(pending)), tpl::io::operation_aborted);
}

tpl::task<std::string> read_then_write_from_a_worker(pipe_stream& reader, pipe_stream& writer) {
  co_await tpl::resume_on(tpl::thread_pool::default_pool());
  std::string all;
  for (int i = 0; i < 50; ++i) {
    std::array<std::byte, 8> buf{};
    auto received = reader.read_async(buf);  // started first: nothing is in the pipe yet
    const std::string message = "m" + std::to_string(i);
    co_await writer.write_async(bytes_of(message));
    const std::size_t n = co_await std::move(received);
    all += string_of(std::span(buf).first(n)) + ",";
  }
  co_return all;
}

TEST_P(io_pipe, a_read_started_before_its_write_by_one_coroutine_on_a_worker_returns_pending) {
  auto [reader, writer] = create_pipe();
  std::string expected;
  for (int i = 0; i < 50; ++i) expected += "m" + std::to_string(i) + ",";
  EXPECT_EQ(tpl::sync_wait(read_then_write_from_a_worker(reader, writer)), expected);
}

TEST_P(io_pipe, close_racing_a_write_and_a_pending_read_ends_the_read_once_with_data_or_aborted) {
  // Bounded: 200 rounds. Each round starts a read, then lets a write from another thread and the
  // reader's close race it; the read must end exactly once, with the bytes or as aborted, and
  // closing must never hang or touch freed memory (the sanitizer builds check the latter).
  int with_data = 0;
  int aborted = 0;
  for (int round = 0; round < 200; ++round) {
    auto [reader, writer] = create_pipe();
    std::array<std::byte, 4> buf{};
    auto pending = reader.read_async(buf);
    std::thread write_side([&writer = writer] {
      try {
        (void)tpl::sync_wait(writer.write_async(bytes_of("abcd")));
      } catch (const tpl::io::io_error& e) {
        EXPECT_EQ(e.code(), std::error_code(EPIPE, std::system_category())) << "only a closed reader may refuse it";
      }
    });
    std::thread close_side([&reader = reader] { reader.close(); });
    try {
      const std::size_t n = tpl::sync_wait(std::move(pending));
      EXPECT_GT(n, 0u);
      EXPECT_EQ(string_of(std::span(buf).first(n)), std::string("abcd").substr(0, n));
      ++with_data;
    } catch (const tpl::io::operation_aborted&) {
      ++aborted;
    }
    write_side.join();
    close_side.join();
  }
  EXPECT_EQ(with_data + aborted, 200);
}

TEST_P(io_pipe, pending_reads_on_many_pipes_hold_no_pool_thread_and_each_gets_its_own_bytes) {
  // The pool engine waits on the socket engine's readiness (the kernel's RWF_NOWAIT on pipes),
  // io_uring in its ring: neither parks a pool worker per waiting read.
  if (GetParam() == engine_choice::pool_poll_pipes)
    GTEST_SKIP() << "the poll(2) path of kernels without RWF_NOWAIT on pipes blocks a worker per waiting read";
  constexpr int kPipes = 32;
  std::vector<std::pair<pipe_stream, pipe_stream>> pipes;
  for (int i = 0; i < kPipes; ++i) pipes.push_back(create_pipe());
  std::vector<std::array<std::byte, 8>> bufs(kPipes);
  std::vector<tpl::value_task<std::size_t>> reads;
  const std::size_t waiting_before = engine().operations_waiting();
  for (int i = 0; i < kPipes; ++i) reads.push_back(pipes[i].first.read_async(bufs[i]));
  ASSERT_TRUE(wait_until([&] { return engine().operations_waiting() >= waiting_before + kPipes; },
                         "every read is pending"));
  EXPECT_LT(tpl::thread_pool::default_pool().stats().blocked_threads, static_cast<unsigned>(kPipes))
      << "a pool worker is blocked for each waiting read";
  for (int i = 0; i < kPipes; ++i) {
    const std::string message = "p" + std::to_string(i);
    EXPECT_EQ(tpl::sync_wait(pipes[i].second.write_async(bytes_of(message))), message.size());
  }
  for (int i = 0; i < kPipes; ++i) {
    const std::size_t n = tpl::sync_wait(std::move(reads[i]));
    EXPECT_EQ(string_of(std::span(bufs[i]).first(n)), "p" + std::to_string(i));
  }
}

TEST_P(io_pipe, a_second_pending_read_on_one_stream_throws_invalid_operation_and_takes_nothing) {
  auto [reader, writer] = create_pipe();
  std::byte first[8];
  std::byte second[8];
  const std::size_t waiting_before = engine().operations_waiting();
  auto pending = reader.read_async(first);
  ASSERT_TRUE(wait_until([&] { return engine().operations_waiting() > waiting_before; }, "the read is pending"));
  EXPECT_THROW((void)tpl::sync_wait(reader.read_async(second)), tpl::invalid_operation);
  EXPECT_EQ(tpl::sync_wait(writer.write_async(bytes_of("one"))), 3u);
  const std::size_t n = tpl::sync_wait(std::move(pending));
  EXPECT_EQ(string_of(std::span(first).first(n)), "one") << "the refused read took nothing";
}

TEST_P(io_pipe, a_second_pending_write_on_one_stream_throws_invalid_operation_and_writes_nothing) {
  auto [reader, writer] = create_pipe();
  const auto data = pattern(0, 1u << 20);  // 16 times the default pipe capacity: the write waits
  const std::size_t waiting_before = engine().operations_waiting();
  auto pending = writer.write_async(data);
  ASSERT_TRUE(wait_until([&] { return engine().operations_waiting() > waiting_before; }, "the write is pending"));
  EXPECT_THROW((void)tpl::sync_wait(writer.write_async(bytes_of("intruder"))), tpl::invalid_operation);
  tpl::task<std::string> drained = tpl::run([&reader = reader] { return read_to_end(reader, 4096); });
  EXPECT_EQ(tpl::sync_wait(std::move(pending)), data.size());
  // Once the first write has ended, the stream takes the next one.
  EXPECT_EQ(tpl::sync_wait(writer.write_async(bytes_of("tail"))), 4u);
  writer.close();
  const std::string got = tpl::sync_wait(drained);
  ASSERT_EQ(got.size(), data.size() + 4) << "the refused write wrote nothing";
  EXPECT_EQ(got, string_of(data) + "tail");
}

INSTANTIATE_TEST_SUITE_P(engines, io_pipe,
                         ::testing::Values(engine_choice::pool, engine_choice::io_uring,
                                           engine_choice::io_uring_ring_only, engine_choice::pool_poll_pipes),
                         engine_name);

TEST(io_uring_engine, shutting_down_with_a_read_pending_aborts_it_and_returns) {
  std::string why;
  auto ring = tpl::io::detail::make_uring_engine(&why);
  if (!ring) GTEST_SKIP() << "io_uring is not available here (" << why << ")";
  tpl::io::detail::set_engine_override_for_testing(ring.get());
  auto [reader, writer] = create_pipe();
  tpl::io::detail::set_engine_override_for_testing(nullptr);
  std::byte buf[4];
  auto pending = reader.read_async(buf);
  ASSERT_TRUE(wait_until([&] { return ring->operations_waiting() == 1; }, "the read is submitted"));
  ring.reset();  // cancels what is in flight, waits for it, stops the completion thread
  EXPECT_THROW((void)tpl::sync_wait(std::move(pending)), tpl::io::operation_aborted);
}

}  // namespace

}  // namespace io_pipe_test_cpp
