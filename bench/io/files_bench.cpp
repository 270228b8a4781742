// bench_files — tpl::io file reads against a plain blocking pread loop, on a file in the page cache.
//
//   bench_files [--size-mb N] [--random-reads N] [--path FILE] [--engine epoll|io_uring|pread|all]
//
// Workloads (the "files" group):
//   seq     the whole file read in 64 KiB chunks with read_async (one coroutine); MiB/s
//   rand    N random 4 KiB-aligned reads with read_at_async, one after another; reads/s
//   rand16  the same N reads split over 16 concurrent tasks; reads/s
// --engine all (the default) runs each engine in a child process of its own, since the engine is
// chosen once per process from TPL_IO_ENGINE: epoll (the pool engine), io_uring, then the pread
// loop. The file is written once and read through once before timing, so every run reads from
// the page cache. The default size is 256 MiB (the 1 GiB with --size-mb 1024) to fit a busy
// machine's memory and time.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <tpl/io.hpp>
#include <tpl/tpl.hpp>

extern char** environ;

namespace {

constexpr std::size_t kSeqChunk = 64 * 1024;
constexpr std::size_t kRandChunk = 4096;
constexpr int kRandTasks = 16;

struct options {
  std::uint64_t size_mb = 256;
  int random_reads = 100'000;
  std::string path = (std::filesystem::temp_directory_path() / "tpl_bench_files.dat").string();
  std::string engine = "all";
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void prepare(const options& o) {
  const std::uint64_t size = o.size_mb << 20;
  std::error_code ec;
  if (std::filesystem::file_size(o.path, ec) != size) {
    const int fd = ::open(o.path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) { std::perror("bench_files: create"); std::exit(1); }
    std::vector<char> block(1 << 20);
    for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 131);
    for (std::uint64_t done = 0; done < size; done += block.size())
      if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) { std::perror("write"); std::exit(1); }
    ::close(fd);
  }
  // Read it through once so that every measurement reads from the page cache.
  const int fd = ::open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<char> buf(1 << 20);
  while (::read(fd, buf.data(), buf.size()) > 0) {}
  ::close(fd);
}

std::vector<std::uint64_t> random_offsets(const options& o) {
  std::mt19937_64 rng(42);
  const std::uint64_t blocks = (o.size_mb << 20) / kRandChunk;
  std::vector<std::uint64_t> v(static_cast<std::size_t>(o.random_reads));
  for (auto& x : v) x = (rng() % blocks) * kRandChunk;
  return v;
}

void report(const char* engine, const char* workload, double value, const char* unit, double secs) {
  std::printf("%-9s %-7s %12.0f %-8s (%.3f s)\n", engine, workload, value, unit, secs);
  std::fflush(stdout);
}

// --- tpl::io ---------------------------------------------------------------------------------

tpl::task<std::uint64_t> seq_read(tpl::io::file& f) {
  std::vector<std::byte> buf(kSeqChunk);
  std::uint64_t total = 0;
  while (const std::size_t n = co_await f.read_async(buf)) total += n;
  co_return total;
}

tpl::task<std::uint64_t> rand_read(tpl::io::file& f, const std::vector<std::uint64_t>& offsets, std::size_t begin,
                                   std::size_t end) {
  std::vector<std::byte> buf(kRandChunk);
  std::uint64_t total = 0;
  for (std::size_t i = begin; i < end; ++i) total += co_await f.read_at_async(offsets[i], buf);
  co_return total;
}

void run_tpl(const options& o, const char* name) {
  const auto offsets = random_offsets(o);
  {
    auto f = tpl::io::file::open(o.path, tpl::io::file_mode::open, tpl::io::file_access::read);
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t bytes = tpl::sync_wait(seq_read(f));
    const double s = seconds_since(t0);
    report(name, "seq", static_cast<double>(bytes) / (1 << 20) / s, "MiB/s", s);
  }
  {
    auto f = tpl::io::file::open(o.path, tpl::io::file_mode::open, tpl::io::file_access::read);
    const auto t0 = std::chrono::steady_clock::now();
    (void)tpl::sync_wait(rand_read(f, offsets, 0, offsets.size()));
    const double s = seconds_since(t0);
    report(name, "rand", static_cast<double>(offsets.size()) / s, "reads/s", s);
  }
  {
    auto f = tpl::io::file::open(o.path, tpl::io::file_mode::open, tpl::io::file_access::read);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<tpl::task<std::uint64_t>> tasks;
    const std::size_t per = offsets.size() / kRandTasks;
    for (int t = 0; t < kRandTasks; ++t) {
      const std::size_t b = per * static_cast<std::size_t>(t);
      const std::size_t e = t + 1 == kRandTasks ? offsets.size() : b + per;
      tasks.push_back(tpl::run([&f, &offsets, b, e] { return rand_read(f, offsets, b, e); }));
    }
    for (auto& t : tasks) (void)tpl::sync_wait(t);
    const double s = seconds_since(t0);
    report(name, "rand16", static_cast<double>(offsets.size()) / s, "reads/s", s);
  }
}

// --- plain blocking pread ----------------------------------------------------------------------

void run_pread(const options& o) {
  const auto offsets = random_offsets(o);
  const int fd = ::open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<char> buf(kSeqChunk);
  auto t0 = std::chrono::steady_clock::now();
  std::uint64_t total = 0;
  for (ssize_t n; (n = ::pread(fd, buf.data(), kSeqChunk, static_cast<off_t>(total))) > 0;) total += static_cast<std::uint64_t>(n);
  double s = seconds_since(t0);
  report("pread", "seq", static_cast<double>(total) / (1 << 20) / s, "MiB/s", s);
  t0 = std::chrono::steady_clock::now();
  for (const auto off : offsets) total += static_cast<std::uint64_t>(::pread(fd, buf.data(), kRandChunk, static_cast<off_t>(off)));
  s = seconds_since(t0);
  report("pread", "rand", static_cast<double>(offsets.size()) / s, "reads/s", s);
  ::close(fd);
}

int run_child(const char* self, const options& o, const char* engine) {
  std::vector<std::string> args = {self, "--engine", engine, "--size-mb", std::to_string(o.size_mb),
                                   "--random-reads", std::to_string(o.random_reads), "--path", o.path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) return 1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--size-mb") o.size_mb = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--random-reads") o.random_reads = std::atoi(argv[i + 1]);
    else if (flag == "--path") o.path = argv[i + 1];
    else if (flag == "--engine") o.engine = argv[i + 1];
    else { std::fprintf(stderr, "bench_files: unknown option %s\n", argv[i]); return 2; }
  }
  if (o.size_mb == 0 || o.random_reads <= 0) { std::fprintf(stderr, "bench_files: bad size or count\n"); return 2; }
  if (o.engine == "all") {
    prepare(o);
    std::printf("bench_files: %llu MiB file, %d random 4 KiB reads, page cache warm\n",
                static_cast<unsigned long long>(o.size_mb), o.random_reads);
    std::fflush(stdout);
    int rc = 0;
    for (const char* e : {"epoll", "io_uring", "pread"}) rc |= run_child(argv[0], o, e);
    return rc;
  }
  if (o.engine == "pread") {
    run_pread(o);
    return 0;
  }
  ::setenv("TPL_IO_ENGINE", o.engine.c_str(), 1);
  if (tpl::io::active_io_engine() != (o.engine == "io_uring" ? tpl::io::io_engine::io_uring : tpl::io::io_engine::pool)) {
    std::printf("%-9s skipped: %s\n", o.engine.c_str(), tpl::io::io_engine_fallback_reason().c_str());
    return 0;
  }
  run_tpl(o, o.engine == "epoll" ? "pool" : "io_uring");
  return 0;
}
