// The files groups of `make bench`: tpl::io's two engines (the pool engine, the default, and
// io_uring) and a plain blocking loop without tpl, on one file in the page cache.
//
//   files_seq_read      the whole 1 GiB file in 64 KiB read_async calls (quick: its first 16 MiB)
//   files_rand_read     100,000 read_at_async of 4 KiB at random block offsets, one after another
//                       (quick: 5,000)
//   files_rand_read_16  the same reads split over 16 concurrent tasks (threads for the plain loop)
//   files_seq_write     64 MiB in 64 KiB write_async calls to a new file, no fsync (quick: 16 MiB)
//   files_rand_write    25,000 write_at_async of 4 KiB at random block offsets of the read file,
//                       each block written with the bytes it holds (quick: 1,000 in its first
//                       16 MiB)
//
// The file (TPL_BENCH_FILE, written and read through once by bench/run.py; without it this program
// makes its own in the temp directory) holds 4 KiB blocks, block b filled with the byte b mod 256.
// Random offsets come from one LCG every peer uses (bench/peers/README.md): x = x * 6364136223846793005
// + 1442695040888963407 from x = 42, block = (x >> 33) mod blocks. Checksums: the bytes read or
// written; for random reads, the sum of the first byte of every block read (so the same blocks).
// Sequential writes go to TPL_BENCH_WRITE_FILE (or a file beside the read one); random writes
// rewrite blocks of the read file in place, in the page cache like the reads (a new sparse file
// would measure the file system's block allocation).
//
// The engine is chosen once per process from TPL_IO_ENGINE, and every `--run` is a process of its
// own: a method sets the variable before its first file::open. `--list` leaves out the io_uring
// methods where the kernel refuses io_uring (their rows would measure the fallback).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <tpl/io.hpp>
#include <tpl/tpl.hpp>

#include "alloc_counter_impl.hpp"
#include "workload.hpp"

namespace {

using tpl::io::file;
using tpl::io::file_access;
using tpl::io::file_mode;

constexpr std::size_t kSeqChunk = 64 * 1024;
constexpr std::size_t kBlock = 4096;
constexpr int kConcurrentReaders = 16;

constexpr std::uint64_t kReadBytes = 1ull << 30, kQuickReadBytes = 16ull << 20;
constexpr int kRandomReads = 100'000, kQuickRandomReads = 5'000;
constexpr std::uint64_t kWriteBytes = 64ull << 20, kQuickWriteBytes = 16ull << 20;
constexpr int kRandomWrites = 25'000, kQuickRandomWrites = 1'000;

std::uint64_t read_bytes(bool quick) { return quick ? kQuickReadBytes : kReadBytes; }
std::uint64_t write_bytes(bool quick) { return quick ? kQuickWriteBytes : kWriteBytes; }

std::string data_path() {
  if (const char* p = std::getenv("TPL_BENCH_FILE")) return p;
  return (std::filesystem::temp_directory_path() / "tpl_wl_files.dat").string();
}

std::string write_path() {
  if (const char* p = std::getenv("TPL_BENCH_WRITE_FILE")) return p;
  return data_path() + ".write";
}

/// Block b filled with b mod 256: the layout every program of the group reads.
/// One memset per block: a byte loop through the vector is not vectorized where the vector lives in
/// a coroutine frame (a char store may alias its size), and it cost more than the writes.
void fill_blocks(std::vector<char>& buf, std::uint64_t first_block) {
  char* p = buf.data();
  const std::size_t blocks = buf.size() / kBlock;
  for (std::size_t b = 0; b < blocks; ++b) std::memset(p + b * kBlock, static_cast<int>((first_block + b) & 0xff), kBlock);
}

/// A standalone run (no TPL_BENCH_FILE from bench/run.py, which prepares the file itself): makes
/// the data file if needed and reads it through once, so that every run reads the page cache.
void ensure_data_file() {
  static const bool ready = [] {
    if (std::getenv("TPL_BENCH_FILE") != nullptr) return true;
    const std::string path = data_path();
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec || size < kReadBytes) {
      const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) { std::perror("tpl_wl_files: create"); std::exit(1); }
      std::vector<char> chunk(1 << 20);
      for (std::uint64_t off = 0; off < kReadBytes; off += chunk.size()) {
        fill_blocks(chunk, off / kBlock);
        if (::write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) { std::perror("write"); std::exit(1); }
      }
      ::close(fd);
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    std::vector<char> buf(1 << 20);
    while (::read(fd, buf.data(), buf.size()) > 0) {}
    ::close(fd);
    return true;
  }();
  (void)ready;
}

std::vector<std::uint64_t> random_offsets(int count, std::uint64_t region_bytes) {
  std::uint64_t x = 42;
  const std::uint64_t blocks = region_bytes / kBlock;
  std::vector<std::uint64_t> offsets(static_cast<std::size_t>(count));
  for (auto& off : offsets) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    off = ((x >> 33) % blocks) * kBlock;
  }
  return offsets;
}

long long expected_random_read_sum(int count, std::uint64_t region_bytes) {
  long long sum = 0;
  for (const auto off : random_offsets(count, region_bytes)) sum += static_cast<long long>((off / kBlock) & 0xff);
  return sum;
}

// Selects the engine for this process; false (and a line on stderr) if io_uring was refused.
bool use_engine(tpl::io::io_engine engine) {
  ::setenv("TPL_IO_ENGINE", engine == tpl::io::io_engine::io_uring ? "io_uring" : "epoll", 1);
  if (tpl::io::active_io_engine() == engine) return true;
  std::fprintf(stderr, "tpl_wl_files: io_uring refused: %s\n", tpl::io::io_engine_fallback_reason().c_str());
  return false;
}

// --- tpl::io -------------------------------------------------------------------------------------

tpl::task<long long> seq_read(file& f, std::uint64_t limit) {
  std::vector<std::byte> buf(kSeqChunk);
  std::uint64_t total = 0;
  while (total < limit) {
    const std::size_t n = co_await f.read_async(std::span(buf).first(std::min<std::uint64_t>(kSeqChunk, limit - total)));
    if (n == 0) break;
    total += n;
  }
  co_return static_cast<long long>(total);
}

tpl::task<long long> rand_read(file& f, const std::vector<std::uint64_t>& offsets, std::size_t begin, std::size_t end) {
  std::vector<std::byte> buf(kBlock);
  long long sum = 0;
  for (std::size_t i = begin; i < end; ++i) {
    if (co_await f.read_at_async(offsets[i], buf) != kBlock) co_return -1;
    sum += static_cast<long long>(std::to_integer<unsigned char>(buf[0]));
  }
  co_return sum;
}

tpl::task<long long> seq_write(file& f, std::uint64_t bytes) {
  std::vector<char> chunk(kSeqChunk);
  std::uint64_t total = 0;
  for (; total < bytes; total += kSeqChunk) {
    fill_blocks(chunk, total / kBlock);
    co_await f.write_async(std::as_bytes(std::span(chunk)));
  }
  co_return static_cast<long long>(total);
}

tpl::task<long long> rand_write(file& f, const std::vector<std::uint64_t>& offsets) {
  std::vector<char> block(kBlock);
  long long total = 0;
  for (const auto off : offsets) {
    fill_blocks(block, off / kBlock);
    total += static_cast<long long>(co_await f.write_at_async(off, std::as_bytes(std::span(block))));
  }
  co_return total;
}

long long tpl_seq_read(tpl::io::io_engine engine, bool quick) {
  if (!use_engine(engine)) return -1;
  ensure_data_file();
  auto f = file::open(data_path(), file_mode::open, file_access::read);
  return tpl::sync_wait(seq_read(f, read_bytes(quick)));
}

long long tpl_rand_read(tpl::io::io_engine engine, bool quick, int tasks) {
  if (!use_engine(engine)) return -1;
  ensure_data_file();
  const auto offsets = random_offsets(quick ? kQuickRandomReads : kRandomReads, read_bytes(quick));
  auto f = file::open(data_path(), file_mode::open, file_access::read);
  if (tasks == 1) return tpl::sync_wait(rand_read(f, offsets, 0, offsets.size()));
  std::vector<tpl::task<long long>> readers;
  for (int t = 0; t < tasks; ++t) {
    const std::size_t b = offsets.size() * static_cast<std::size_t>(t) / static_cast<std::size_t>(tasks);
    const std::size_t e = offsets.size() * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(tasks);
    readers.push_back(tpl::run([&f, &offsets, b, e] { return rand_read(f, offsets, b, e); }));
  }
  long long sum = 0;
  for (auto& r : readers) {
    const long long s = tpl::sync_wait(r);
    if (s < 0) return -1;
    sum += s;
  }
  return sum;
}

long long tpl_seq_write(tpl::io::io_engine engine, bool quick) {
  if (!use_engine(engine)) return -1;
  auto f = file::open(write_path(), file_mode::create, file_access::write);
  return tpl::sync_wait(seq_write(f, write_bytes(quick)));
}

long long tpl_rand_write(tpl::io::io_engine engine, bool quick) {
  if (!use_engine(engine)) return -1;
  ensure_data_file();
  auto f = file::open(data_path(), file_mode::open, file_access::write);
  return tpl::sync_wait(rand_write(f, random_offsets(quick ? kQuickRandomWrites : kRandomWrites, read_bytes(quick))));
}

// --- plain blocking system calls, no tpl --------------------------------------------------------

long long plain_seq_read(bool quick) {
  ensure_data_file();
  const int fd = ::open(data_path().c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<char> buf(kSeqChunk);
  const std::uint64_t limit = read_bytes(quick);
  std::uint64_t total = 0;
  for (ssize_t n; total < limit && (n = ::read(fd, buf.data(), std::min<std::uint64_t>(kSeqChunk, limit - total))) > 0;)
    total += static_cast<std::uint64_t>(n);
  ::close(fd);
  return static_cast<long long>(total);
}

long long pread_range(int fd, const std::vector<std::uint64_t>& offsets, std::size_t begin, std::size_t end) {
  char buf[kBlock];
  long long sum = 0;
  for (std::size_t i = begin; i < end; ++i) {
    if (::pread(fd, buf, kBlock, static_cast<off_t>(offsets[i])) != static_cast<ssize_t>(kBlock)) return -1;
    sum += static_cast<unsigned char>(buf[0]);
  }
  return sum;
}

long long plain_rand_read(bool quick, int threads) {
  ensure_data_file();
  const auto offsets = random_offsets(quick ? kQuickRandomReads : kRandomReads, read_bytes(quick));
  const int fd = ::open(data_path().c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<long long> sums(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    const std::size_t b = offsets.size() * static_cast<std::size_t>(t) / static_cast<std::size_t>(threads);
    const std::size_t e = offsets.size() * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(threads);
    pool.emplace_back([&, t, b, e] { sums[static_cast<std::size_t>(t)] = pread_range(fd, offsets, b, e); });
  }
  for (auto& th : pool) th.join();
  ::close(fd);
  long long sum = 0;
  for (const long long s : sums) {
    if (s < 0) return -1;
    sum += s;
  }
  return sum;
}

long long plain_seq_write(bool quick) {
  const int fd = ::open(write_path().c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  std::vector<char> chunk(kSeqChunk);
  std::uint64_t total = 0;
  for (; total < write_bytes(quick); total += kSeqChunk) {
    fill_blocks(chunk, total / kBlock);
    if (::write(fd, chunk.data(), kSeqChunk) != static_cast<ssize_t>(kSeqChunk)) total = 0;
  }
  ::close(fd);
  return static_cast<long long>(total);
}

long long plain_rand_write(bool quick) {
  ensure_data_file();
  const int fd = ::open(data_path().c_str(), O_WRONLY | O_CLOEXEC);
  std::vector<char> block(kBlock);
  long long total = 0;
  for (const auto off : random_offsets(quick ? kQuickRandomWrites : kRandomWrites, read_bytes(quick))) {
    fill_blocks(block, off / kBlock);
    total += ::pwrite(fd, block.data(), kBlock, static_cast<off_t>(off));
  }
  ::close(fd);
  return total;
}

bool io_uring_usable() {
  ::setenv("TPL_IO_ENGINE", "io_uring", 1);
  return tpl::io::active_io_engine() == tpl::io::io_engine::io_uring;
}

}  // namespace

int main(int argc, char** argv) {
  using tpl::io::io_engine;
  const long long rand_sum = expected_random_read_sum(kRandomReads, kReadBytes);
  const long long quick_rand_sum = expected_random_read_sum(kQuickRandomReads, kQuickReadBytes);
  const auto read_all = static_cast<long long>(kReadBytes), quick_read_all = static_cast<long long>(kQuickReadBytes);
  const auto write_all = static_cast<long long>(kWriteBytes), quick_write_all = static_cast<long long>(kQuickWriteBytes);
  const long long rand_written = kRandomWrites * static_cast<long long>(kBlock);
  const long long quick_rand_written = kQuickRandomWrites * static_cast<long long>(kBlock);

  std::vector<tpl_bench::method> methods;
  const auto add_engine = [&](io_engine e, const std::string& label) {
    methods.push_back({"files_seq_read", "tpl::io read_async 64 KiB, " + label,
                       [e](bool q) { return tpl_seq_read(e, q); }, read_all, quick_read_all});
    methods.push_back({"files_rand_read", "tpl::io read_at_async 4 KiB, " + label,
                       [e](bool q) { return tpl_rand_read(e, q, 1); }, rand_sum, quick_rand_sum});
    methods.push_back({"files_rand_read_16", "16 tasks of read_at_async 4 KiB, " + label,
                       [e](bool q) { return tpl_rand_read(e, q, kConcurrentReaders); }, rand_sum, quick_rand_sum});
    methods.push_back({"files_seq_write", "tpl::io write_async 64 KiB, " + label,
                       [e](bool q) { return tpl_seq_write(e, q); }, write_all, quick_write_all});
    methods.push_back({"files_rand_write", "tpl::io write_at_async 4 KiB, " + label,
                       [e](bool q) { return tpl_rand_write(e, q); }, rand_written, quick_rand_written});
  };
  add_engine(io_engine::pool, "pool engine (default)");
  // Probing io_uring fixes this process's engine: only `--list` probes, and it does no I/O.
  const bool listing = argc > 1 && std::strcmp(argv[1], "--list") == 0;
  if (!listing || io_uring_usable()) add_engine(io_engine::io_uring, "io_uring engine");
  methods.push_back({"files_seq_read", "blocking read() 64 KiB, no tpl", plain_seq_read, read_all, quick_read_all});
  methods.push_back({"files_rand_read", "blocking pread() 4 KiB, no tpl",
                     [](bool q) { return plain_rand_read(q, 1); }, rand_sum, quick_rand_sum});
  methods.push_back({"files_rand_read_16", "16 threads of blocking pread() 4 KiB, no tpl",
                     [](bool q) { return plain_rand_read(q, kConcurrentReaders); }, rand_sum, quick_rand_sum});
  methods.push_back({"files_seq_write", "blocking write() 64 KiB, no tpl", plain_seq_write, write_all, quick_write_all});
  methods.push_back({"files_rand_write", "blocking pwrite() 4 KiB, no tpl", plain_rand_write, rand_written, quick_rand_written});
  return tpl_bench::workload_main(argc, argv, methods);
}
