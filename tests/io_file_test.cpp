// tpl::io::file: opening and its errors, positional and sequential reads and writes, the end of
// file, cancellation before start, close with operations started, many concurrent readers, and
// the engine choice (TPL_IO_ENGINE's parsing, the fallback when io_uring is refused). Every
// engine-dependent test runs on the pool engine and on io_uring.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "io_test_support.hpp"

namespace io_file_test_cpp {

namespace {

using namespace tpl_test;
using tpl::io::file;
using tpl::io::file_access;
using tpl::io::file_mode;

// --- opening: errors carry the error code -------------------------------------------------

TEST(io_file_open, a_missing_file_throws_file_not_found_with_enoent) {
  const auto missing = std::filesystem::temp_directory_path() / "tpl_io_definitely_missing_file";
  std::filesystem::remove(missing);
  try {
    (void)file::open(missing, file_mode::open, file_access::read);
    FAIL() << "opened a missing file";
  } catch (const tpl::io::file_not_found& e) {
    EXPECT_EQ(e.code(), std::error_code(ENOENT, std::system_category()));
    EXPECT_NE(std::string(e.what()).find("tpl_io_definitely_missing_file"), std::string::npos) << e.what();
  }
}

TEST(io_file_open, a_missing_directory_on_the_path_throws_file_not_found) {
  const auto missing = std::filesystem::temp_directory_path() / "tpl_io_missing_dir" / "f";
  std::filesystem::remove_all(missing.parent_path());
  EXPECT_THROW((void)file::open(missing, file_mode::create, file_access::write), tpl::io::file_not_found);
}

TEST(io_file_open, a_directory_throws_access_denied_with_eisdir) {
  try {
    (void)file::open(std::filesystem::temp_directory_path(), file_mode::open, file_access::read);
    FAIL() << "opened a directory as a file";
  } catch (const tpl::io::access_denied& e) {
    EXPECT_EQ(e.code(), std::error_code(EISDIR, std::system_category()));
  }
}

TEST(io_file_open, permission_denied_throws_access_denied_with_eacces) {
  std::filesystem::path target;
  std::filesystem::path cleanup;
  if (::geteuid() == 0) {
    // Root bypasses file modes; sysfs refuses to create files even for root.
    target = "/sys/tpl_io_test_cannot_create";
  } else {
    cleanup = std::filesystem::temp_directory_path() / ("tpl_io_no_access_" + std::to_string(::getpid()));
    { auto f = file::open(cleanup, file_mode::create, file_access::write); }
    std::filesystem::permissions(cleanup, std::filesystem::perms::none);
    target = cleanup;
  }
  int code = 0;
  try {
    (void)file::open(target, ::geteuid() == 0 ? file_mode::create : file_mode::open, file_access::read_write);
  } catch (const tpl::io::access_denied& e) {
    code = e.code().value();
  } catch (const tpl::io::io_error& e) {
    code = -e.code().value();
  }
  if (!cleanup.empty()) std::filesystem::remove(cleanup);
  if (::geteuid() == 0 && code != EACCES)
    GTEST_SKIP() << "running as root and " << target << " did not refuse creation with EACCES (got " << code
                 << "): no path here denies root";
  EXPECT_EQ(code, EACCES);
}

TEST(io_file_open, create_new_on_an_existing_file_throws_io_error_with_eexist) {
  const auto p = std::filesystem::temp_directory_path() / ("tpl_io_exists_" + std::to_string(::getpid()));
  { auto f = file::open(p, file_mode::create, file_access::write); }
  try {
    (void)file::open(p, file_mode::create_new, file_access::write);
    ADD_FAILURE() << "create_new opened an existing file";
  } catch (const tpl::io::io_error& e) {
    EXPECT_EQ(e.code(), std::error_code(EEXIST, std::system_category()));
  }
  std::filesystem::remove(p);
}

TEST(io_file_open, modes_that_need_write_access_reject_read_only_access) {
  const auto p = std::filesystem::temp_directory_path() / "tpl_io_never_created";
  EXPECT_THROW((void)file::open(p, file_mode::truncate, file_access::read), std::invalid_argument);
  EXPECT_THROW((void)file::open(p, file_mode::append, file_access::read), std::invalid_argument);
  EXPECT_THROW((void)file::open(p, file_mode::create, file_access::read), std::invalid_argument);
  EXPECT_THROW((void)file::open(p, file_mode::open, static_cast<file_access>(0)), std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(p));
}

TEST(io_file_open, a_closed_file_refuses_operations_with_invalid_operation) {
  file f;
  std::byte b[4];
  EXPECT_FALSE(f.is_open());
  EXPECT_EQ(f.native_handle(), -1);
  EXPECT_THROW((void)f.read_at_async(0, b), tpl::invalid_operation);
  EXPECT_THROW((void)f.size(), tpl::invalid_operation);
  EXPECT_THROW(tpl::sync_wait(f.read_async(b)), tpl::invalid_operation);
  f.close();  // idempotent
}

// --- the engine choice -------------------------------------------------------------------------

TEST(io_engine_choice, tpl_io_engine_is_parsed_strictly) {
  EXPECT_EQ(tpl::io::detail::parse_io_engine("epoll"), tpl::io::io_engine::pool);
  EXPECT_EQ(tpl::io::detail::parse_io_engine("io_uring"), tpl::io::io_engine::io_uring);
  for (const char* bad : {"", "EPOLL", "io_uring ", "uring", "1", "epoll,io_uring"}) {
    try {
      (void)tpl::io::detail::parse_io_engine(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const std::invalid_argument& e) {
      // The same message as every other tpl variable's (src/env_parse.hpp).
      EXPECT_EQ(std::string(e.what()), std::string("tpl: environment variable TPL_IO_ENGINE=\"") + bad +
                                           "\" is invalid: expected epoll or io_uring");
    }
  }
  EXPECT_THROW((void)tpl::io::detail::choose_engine("bogus"), std::invalid_argument);
}

TEST(io_engine_choice, epoll_and_unset_choose_the_pool_engine) {
  EXPECT_EQ(tpl::io::detail::choose_engine("epoll").chosen->kind(), tpl::io::io_engine::pool);
  EXPECT_EQ(tpl::io::detail::choose_engine(nullptr).chosen->kind(), tpl::io::io_engine::pool);
}

int refuse_with_eperm(unsigned, void*, unsigned) { return -EPERM; }
int refuse_with_enosys(unsigned, void*, unsigned) { return -ENOSYS; }

TEST(io_engine_choice, io_uring_refused_at_run_time_falls_back_to_the_pool_engine_and_says_why) {
  for (auto refuse : {&refuse_with_eperm, &refuse_with_enosys}) {
    auto choice = tpl::io::detail::choose_engine("io_uring", refuse);
    ASSERT_NE(choice.chosen, nullptr);
    EXPECT_EQ(choice.chosen->kind(), tpl::io::io_engine::pool);
    EXPECT_EQ(choice.owned, nullptr);
    const std::string expected = std::strerror(refuse == &refuse_with_eperm ? EPERM : ENOSYS);
    EXPECT_NE(choice.fallback_reason.find(expected), std::string::npos) << choice.fallback_reason;
  }
  // The fallback engine serves files: a round trip through it works.
  auto choice = tpl::io::detail::choose_engine("io_uring", &refuse_with_eperm);
  tpl::io::detail::set_engine_override_for_testing(choice.chosen);
  const auto p = std::filesystem::temp_directory_path() / ("tpl_io_fallback_" + std::to_string(::getpid()));
  {
    auto f = file::open(p, file_mode::create, file_access::read_write);
    EXPECT_EQ(tpl::sync_wait(f.write_at_async(0, bytes_of("fallback"))), 8u);
    std::byte back[8];
    EXPECT_EQ(tpl::sync_wait(f.read_at_async(0, back)), 8u);
    EXPECT_EQ(string_of(back), "fallback");
  }
  tpl::io::detail::set_engine_override_for_testing(nullptr);
  std::filesystem::remove(p);
}

TEST(io_engine_choice, io_uring_is_chosen_when_the_kernel_allows_it) {
  auto choice = tpl::io::detail::choose_engine("io_uring");
  if (choice.owned == nullptr) GTEST_SKIP() << "io_uring refused here: " << choice.fallback_reason;
  EXPECT_EQ(choice.chosen->kind(), tpl::io::io_engine::io_uring);
  EXPECT_TRUE(choice.fallback_reason.empty());
}

// --- reads and writes, on each engine -------------------------------------------------------

using io_file = io_engine_test;

TEST_P(io_file, write_at_and_read_at_round_trip_at_their_offsets_leaving_a_hole_of_zeros) {
  auto f = file::open(path("f"), file_mode::create_new, file_access::read_write);
  const auto a = pattern(0, 5000);
  const auto b = pattern(20000, 3000);
  EXPECT_EQ(tpl::sync_wait(f.write_at_async(0, a)), a.size());
  EXPECT_EQ(tpl::sync_wait(f.write_at_async(20000, b)), b.size());
  EXPECT_EQ(f.size(), 23000u);
  EXPECT_EQ(f.position(), 0u) << "positional operations do not move the position";
  std::vector<std::byte> back(23000, std::byte{0xee});
  std::size_t got = 0;
  while (got < back.size()) {
    const std::size_t n = tpl::sync_wait(f.read_at_async(got, std::span(back).subspan(got)));
    ASSERT_GT(n, 0u);
    got += n;
  }
  EXPECT_TRUE(std::equal(a.begin(), a.end(), back.begin()));
  EXPECT_TRUE(std::all_of(back.begin() + 5000, back.begin() + 20000, [](std::byte x) { return x == std::byte{0}; }));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), back.begin() + 20000));
}

TEST_P(io_file, read_at_near_the_end_returns_what_is_left_and_past_it_returns_zero) {
  auto f = file::open(path("f"), file_mode::create, file_access::read_write);
  (void)tpl::sync_wait(f.write_at_async(0, pattern(0, 100)));
  std::vector<std::byte> buf(64);
  EXPECT_EQ(tpl::sync_wait(f.read_at_async(90, buf)), 10u);
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + 10, pattern(90, 10).begin()));
  EXPECT_EQ(tpl::sync_wait(f.read_at_async(100, buf)), 0u);
  EXPECT_EQ(tpl::sync_wait(f.read_at_async(1u << 30, buf)), 0u);
}

TEST_P(io_file, sequential_reads_and_writes_advance_the_position_and_append_starts_at_the_end) {
  {
    auto f = file::open(path("f"), file_mode::create, file_access::write);
    EXPECT_EQ(tpl::sync_wait(f.write_async(bytes_of("hello "))), 6u);
    EXPECT_EQ(f.position(), 6u);
  }
  {
    auto f = file::open(path("f"), file_mode::append, file_access::write);
    EXPECT_EQ(f.position(), 6u);
    EXPECT_EQ(tpl::sync_wait(f.write_async(bytes_of("world"))), 5u);
    tpl::sync_wait(f.flush_async());
    tpl::sync_wait(f.flush_async(tpl::io::flush_mode::data));
  }
  auto f = file::open(path("f"), file_mode::open, file_access::read);
  std::string text;
  std::byte chunk[4];
  while (const std::size_t n = tpl::sync_wait(f.read_async(chunk))) text += string_of(std::span(chunk, n));
  EXPECT_EQ(text, "hello world");
  EXPECT_EQ(f.position(), 11u);
  f.seek(6);
  EXPECT_EQ(tpl::sync_wait(f.read_async(chunk)), 4u);
  EXPECT_EQ(string_of(chunk), "worl");
}

TEST_P(io_file, set_size_cuts_and_extends_with_zeros_and_truncate_mode_empties_the_file) {
  {
    auto f = file::open(path("f"), file_mode::create, file_access::read_write);
    (void)tpl::sync_wait(f.write_at_async(0, pattern(0, 1000)));
    f.set_size(10);
    EXPECT_EQ(f.size(), 10u);
    f.set_size(4096);
    std::byte b[8];
    EXPECT_EQ(tpl::sync_wait(f.read_at_async(10, b)), 8u);
    EXPECT_TRUE(std::all_of(std::begin(b), std::end(b), [](std::byte x) { return x == std::byte{0}; }));
  }
  auto f = file::open(path("f"), file_mode::truncate, file_access::write);
  EXPECT_EQ(f.size(), 0u);
}

TEST_P(io_file, a_large_write_at_is_written_whole) {
  auto f = file::open(path("f"), file_mode::create, file_access::read_write);
  const auto data = pattern(7, 8u << 20);
  EXPECT_EQ(tpl::sync_wait(f.write_at_async(7, data)), data.size());
  EXPECT_EQ(f.size(), 7u + data.size());
  std::vector<std::byte> back(data.size());
  std::size_t got = 0;
  while (got < back.size()) got += tpl::sync_wait(f.read_at_async(7 + got, std::span(back).subspan(got)));
  EXPECT_EQ(back, data);
}

TEST_P(io_file, a_token_canceled_before_the_start_cancels_reads_writes_and_flushes) {
  auto f = file::open(path("f"), file_mode::create, file_access::read_write);
  (void)tpl::sync_wait(f.write_at_async(0, pattern(0, 16)));
  tpl::cancellation_token_source cts;
  cts.cancel();
  std::vector<std::byte> buf(16, std::byte{0xee});
  EXPECT_THROW(tpl::sync_wait(f.read_at_async(0, buf, cts.token())), tpl::operation_canceled);
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](std::byte x) { return x == std::byte{0xee}; }));
  EXPECT_THROW(tpl::sync_wait(f.write_at_async(100, pattern(0, 16), cts.token())), tpl::operation_canceled);
  EXPECT_EQ(f.size(), 16u) << "the canceled write wrote nothing";
  EXPECT_THROW(tpl::sync_wait(f.read_async(buf, cts.token())), tpl::operation_canceled);
  EXPECT_EQ(f.position(), 0u);
  EXPECT_THROW(tpl::sync_wait(f.flush_async(tpl::io::flush_mode::data, cts.token())), tpl::operation_canceled);
}

tpl::task<int> read_and_check(file& f, std::uint64_t seed, int reads) {
  int wrong = 0;
  std::vector<std::byte> buf(512);
  std::uint64_t x = seed;
  for (int i = 0; i < reads; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint64_t offset = (x >> 20) % (1u << 20);
    const std::size_t n = co_await f.read_at_async(offset, buf);
    const std::size_t expected = std::min<std::uint64_t>(buf.size(), (1u << 20) - offset);
    if (n != expected || !std::equal(buf.begin(), buf.begin() + n, pattern(offset, n).begin())) ++wrong;
  }
  co_return wrong;
}

TEST_P(io_file, concurrent_read_at_from_many_tasks_each_reads_its_own_bytes) {
  auto f = file::open(path("f"), file_mode::create, file_access::read_write);
  (void)tpl::sync_wait(f.write_at_async(0, pattern(0, 1u << 20)));
  constexpr int kTasks = 64;
  const int reads = scaled(50, 10);
  std::vector<tpl::task<int>> tasks;
  for (int t = 0; t < kTasks; ++t)
    tasks.push_back(tpl::run([&f, t, n = reads] { return read_and_check(f, static_cast<std::uint64_t>(t) + 1, n); }));
  int wrong = 0;
  for (auto& t : tasks) wrong += tpl::sync_wait(t);
  EXPECT_EQ(wrong, 0);
}

tpl::task<int> read_expecting_data_or_abort(file& f, std::uint64_t offset) {
  std::vector<std::byte> buf(256);
  try {
    const std::size_t n = co_await f.read_at_async(offset, buf);
    co_return n == buf.size() && std::equal(buf.begin(), buf.end(), pattern(offset, n).begin()) ? 1 : -1;
  } catch (const tpl::io::operation_aborted& e) {
    co_return e.code() == std::errc::operation_canceled ? 0 : -1;
  }
}

TEST_P(io_file, close_with_operations_started_completes_or_aborts_each_then_closes_the_descriptor) {
  const int rounds = scaled(20, 5);
  int completed = 0, aborted = 0, wrong = 0;
  for (int round = 0; round < rounds; ++round) {
    auto f = file::open(path("f"), file_mode::create, file_access::read_write);
    (void)tpl::sync_wait(f.write_at_async(0, pattern(0, 64 * 256)));
    const int fd = f.native_handle();
    struct stat opened {};
    ASSERT_EQ(::fstat(fd, &opened), 0);
    std::vector<tpl::task<int>> reads;
    for (int i = 0; i < 64; ++i) reads.push_back(read_expecting_data_or_abort(f, 256u * i));
    f.close();
    EXPECT_THROW((void)f.read_at_async(0, std::span<std::byte>()), tpl::invalid_operation);
    for (auto& r : reads) {
      const int outcome = tpl::sync_wait(r);
      completed += outcome == 1, aborted += outcome == 0, wrong += outcome == -1;
    }
    // Every operation has ended, so the last reference is gone and the descriptor is closed. The
    // number itself may already name another file: the pool's gate thread opens /proc/stat to
    // sample the CPU load, and the kernel hands out the lowest free number.
    struct stat now {};
    const bool still_ours = ::fstat(fd, &now) == 0 && now.st_dev == opened.st_dev && now.st_ino == opened.st_ino;
    EXPECT_FALSE(still_ours) << "descriptor " << fd << " still names the file";
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(completed + aborted, 64 * rounds);
}

// --- the pool's I/O counters (thread_pool_stats::io) -------------------------------------------

TEST_P(io_file, a_read_counts_a_completion_in_the_default_pools_io_stats) {
  auto f = file::open(path("f"), file_mode::create, file_access::read_write);
  EXPECT_EQ(tpl::sync_wait(f.write_at_async(0, pattern(0, 64))), 64u);
  tpl::thread_pool& pool = tpl::thread_pool::default_pool();
  const tpl::thread_pool_io_stats before = pool.stats().io;
  std::vector<std::byte> buf(64);
  // From this thread (not a worker): the bytes just written are in the page cache, so with either
  // engine's defaults the read completes here at once, counted for the default pool as a thread
  // that is neither a worker nor an engine; through the ring, the completion thread resumes it on
  // the default pool. Each counts it before the read's continuation runs, so sync_wait returning
  // means the counter has moved.
  EXPECT_EQ(tpl::sync_wait(f.read_at_async(0, buf)), 64u);
  const tpl::thread_pool_io_stats after = pool.stats().io;
  if (GetParam() == engine_choice::pool) {
    EXPECT_GE(after.pool_engine_completions - before.pool_engine_completions, 1u);
  } else {
    EXPECT_GE(after.uring.completions - before.uring.completions, 1u);
  }
  if (GetParam() == engine_choice::io_uring_ring_only) {  // the completion thread woke for it
    EXPECT_GE(after.uring.wakeups - before.uring.wakeups, 1u);
    EXPECT_GE(after.uring.events - before.uring.events, 1u);
    EXPECT_GE(after.uring.largest_batch, 1u);
    std::uint64_t batches = 0;
    for (std::size_t i = 0; i < tpl::io_batch_buckets; ++i) batches += after.uring.batch_sizes[i] - before.uring.batch_sizes[i];
    EXPECT_GE(batches, 1u);
  }
  EXPECT_GE(after.completions() - before.completions(), 1u);
}

TEST_P(io_file, a_read_of_cached_bytes_from_a_thread_outside_the_pool_completes_within_the_call) {
  auto f = file::open(path("f"), file_mode::create, file_access::read_write);
  const std::vector<std::byte> data = pattern(0, 8192);
  EXPECT_EQ(tpl::sync_wait(f.write_at_async(0, data)), data.size());
  std::vector<std::byte> back(data.size());
  auto read = f.read_at_async(0, back);  // the bytes just written are in the page cache
  if (GetParam() == engine_choice::io_uring_ring_only) {
    EXPECT_EQ(tpl::sync_wait(std::move(read)), data.size());
  } else {
    // preadv2(RWF_NOWAIT) on this thread: no hop to a worker, no ring.
    EXPECT_TRUE(read.is_completed()) << "the read went to another thread";
    EXPECT_EQ(tpl::sync_wait(std::move(read)), data.size());
  }
  EXPECT_EQ(back, data);
  std::vector<std::byte> past(16);
  auto at_end = f.read_at_async(data.size() + 100, past);
  if (GetParam() != engine_choice::io_uring_ring_only) {
    EXPECT_TRUE(at_end.is_completed());
  }
  EXPECT_EQ(tpl::sync_wait(std::move(at_end)), 0u) << "past the end: 0 bytes";
}

tpl::task<std::size_t> read_from(tpl::thread_pool& pool, file& f, std::span<std::byte> buf) {
  co_await tpl::resume_on(pool);
  co_return co_await f.read_at_async(0, buf);
}

TEST_P(io_file, a_read_started_on_a_user_pool_is_counted_by_the_pool_it_completes_on) {
  auto f = file::open(path("f"), file_mode::create, file_access::read_write);
  EXPECT_EQ(tpl::sync_wait(f.write_at_async(0, pattern(0, 64))), 64u);
  tpl::thread_pool mine({.thread_count = 1});
  const std::uint64_t default_uring_before = tpl::thread_pool::default_pool().stats().io.uring.completions;
  std::vector<std::byte> buf(64);
  EXPECT_EQ(tpl::sync_wait(read_from(mine, f, buf)), 64u);
  const tpl::thread_pool_io_stats io = mine.stats().io;
  if (GetParam() == engine_choice::pool) {
    // The pool engine ran the system call on the worker that started it: this pool's.
    EXPECT_EQ(io.pool_engine_completions, 1u);
  } else if (GetParam() == engine_choice::io_uring) {
    // The bytes are in the page cache: the read completed on the worker that started it.
    EXPECT_EQ(io.uring.completions, 1u);
  } else {
    // The completion thread serves the default pool: the completion is counted there.
    EXPECT_EQ(io.uring.completions, 0u);
    EXPECT_GE(tpl::thread_pool::default_pool().stats().io.uring.completions - default_uring_before, 1u);
  }
  EXPECT_EQ(io.sockets.wakeups + io.uring.wakeups, 0u) << "only the default pool reports engine threads";
}

tpl::task<std::size_t> write_and_flush_from(tpl::thread_pool& pool, file& f, std::span<const std::byte> data) {
  co_await tpl::resume_on(pool);
  const std::size_t n = co_await f.write_at_async(0, data);
  co_await f.flush_async(tpl::io::flush_mode::data);
  co_return n;
}

TEST_P(io_file, a_write_and_a_flush_started_on_a_user_pool_complete_on_it_unless_every_operation_takes_the_ring) {
  auto f = file::open(path("f"), file_mode::create, file_access::read_write);
  tpl::thread_pool mine({.thread_count = 1});
  const std::uint64_t default_uring_before = tpl::thread_pool::default_pool().stats().io.uring.completions;
  const std::vector<std::byte> data = pattern(0, 8192);
  EXPECT_EQ(tpl::sync_wait(write_and_flush_from(mine, f, data)), data.size());
  const tpl::thread_pool_io_stats io = mine.stats().io;
  if (GetParam() == engine_choice::pool) {
    EXPECT_EQ(io.pool_engine_completions, 2u);
  } else if (GetParam() == engine_choice::io_uring) {
    // The write went into the page cache on the worker that started it (RWF_NOWAIT where the file
    // system takes it, counted as io_uring's; else as the pool engine runs it), and the flush ran
    // there as the pool engine runs it: neither went to the kernel's worker threads through the
    // ring and back through the completion thread.
    EXPECT_EQ(io.pool_engine_completions + io.uring.completions, 2u);
    EXPECT_GE(io.pool_engine_completions, 1u) << "the flush";
  } else {
    // Every operation through the ring: the completion thread counts both for the default pool.
    EXPECT_EQ(io.pool_engine_completions + io.uring.completions, 0u);
    EXPECT_GE(tpl::thread_pool::default_pool().stats().io.uring.completions - default_uring_before, 2u);
  }
  std::vector<std::byte> back(data.size());
  EXPECT_EQ(tpl::sync_wait(f.read_at_async(0, back)), data.size());
  EXPECT_EQ(back, data);
}

INSTANTIATE_TEST_SUITE_P(engines, io_file,
                         ::testing::Values(engine_choice::pool, engine_choice::io_uring,
                                           engine_choice::io_uring_ring_only),
                         engine_name);

}  // namespace

}  // namespace io_file_test_cpp
