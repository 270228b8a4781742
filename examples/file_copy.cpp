// example_file_copy — copies a file with tpl::io, 64 KiB at a time, then runs `wc -c` on the copy
// as a child process and reads its stdout through a tpl::io pipe.
//
//   example_file_copy <source> <destination>
//
// TPL_IO_ENGINE=epoll|io_uring picks the engine (the pool engine by default); the program prints
// which one served it.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <tpl/io.hpp>
#include <tpl/tpl.hpp>

extern char** environ;

namespace {

tpl::task<std::uint64_t> copy(const char* from, const char* to) {
  auto in = tpl::io::file::open(from, tpl::io::file_mode::open, tpl::io::file_access::read);
  auto out = tpl::io::file::open(to, tpl::io::file_mode::create, tpl::io::file_access::write);
  std::vector<std::byte> buf(64 * 1024);
  std::uint64_t total = 0;
  while (const std::size_t n = co_await in.read_async(buf)) {
    co_await out.write_async(std::span(buf).first(n));
    total += n;
  }
  co_await out.flush_async(tpl::io::flush_mode::data);
  co_return total;
}

tpl::task<std::string> output_of_wc(const char* path) {
  auto [reader, writer] = tpl::io::create_pipe();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, writer.native_handle(), STDOUT_FILENO);
  std::string file_arg = path;
  char wc[] = "wc", dash_c[] = "-c";
  char* argv[] = {wc, dash_c, file_arg.data(), nullptr};
  pid_t child = -1;
  const int spawned = posix_spawnp(&child, "wc", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  writer.close();  // the child holds the only write end now
  if (spawned != 0) co_return "(could not run wc)";
  std::string out;
  std::vector<std::byte> buf(256);
  while (const std::size_t n = co_await reader.read_async(buf)) out.append(reinterpret_cast<const char*>(buf.data()), n);
  int status = 0;
  ::waitpid(child, &status, 0);
  co_return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <source> <destination>\n", argv[0]);
    return 2;
  }
  try {
    const std::uint64_t bytes = tpl::sync_wait(copy(argv[1], argv[2]));
    std::printf("copied %llu bytes with the %s engine\n", static_cast<unsigned long long>(bytes),
                tpl::io::to_string(tpl::io::active_io_engine()));
    std::printf("wc -c says: %s", tpl::sync_wait(output_of_wc(argv[2])).c_str());
  } catch (const std::exception& e) {  // io_error, or std::invalid_argument for a bad TPL_IO_ENGINE
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
