// The epoll readiness source (the default): one epoll instance per engine, sockets registered
// once, edge-triggered, for EPOLLIN | EPOLLOUT | EPOLLRDHUP, so no epoll_ctl is made per operation.
//
// Lifetime (readiness_source.hpp, invariant 2): detach() removes the descriptor from epoll, so no
// later epoll_wait reports it, and puts the target on the retired list; end_batch() releases the
// retired targets only after the batch in progress was handed on, so an event returned just
// before the detach still finds its target alive. The eventfd wakes the engine thread when the
// retired list turns non-empty, so retired targets do not wait for an unrelated event (while the
// engine has lent its poll duty, the next poll of whoever holds it takes the wake-up).
//
// epoll_wait may be called by any thread, so the source is lendable(): the engine's poll duty
// (socket_engine.cpp) moves events_ and releasing_ between threads with acquire/release.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <vector>

#include "raw_syscall.hpp"
#include "readiness_source.hpp"
#include "tpl/net/socket_error.hpp"

namespace tpl::net::detail {

namespace {

class epoll_source final : public readiness_source {
 public:
  epoll_source() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) throw socket_error(errno, "tpl::net: epoll_create1 failed");
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) {
      const int e = errno;
      ::close(epoll_fd_);
      throw socket_error(e, "tpl::net: eventfd failed");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up descriptor: the only registration without a target
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
      const int e = errno;
      ::close(wake_fd_);
      ::close(epoll_fd_);
      throw socket_error(e, "tpl::net: epoll_ctl on the engine's eventfd failed");
    }
    events_.reset(new epoll_event[kMaxBatch]);
  }
  // Engines, and so their sources, live as long as the process.
  ~epoll_source() override = default;

  void attach(int fd, readiness_target* t) override {
    t->add_ref();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = t;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      const int e = errno;
      t->release();
      throw socket_error(e, "tpl::net: epoll_ctl(ADD) failed");
    }
  }

  void detach(int fd, readiness_target* t) noexcept override {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);  // fails only for a bad fd: nothing to undo
    bool wake = false;
    {
      std::lock_guard g(retire_lock_);
      wake = retired_.empty();
      try {
        retired_.push_back(t);
      } catch (...) {
        // Out of memory for the list: keep the target alive for good rather than risk a late
        // event on freed memory.
        return;
      }
    }
    if (wake) {
      const std::uint64_t one = 1;
      [[maybe_unused]] ssize_t r = ::write(wake_fd_, &one, sizeof one);  // a full counter is awake
    }
  }

  void wait(std::vector<ready_event>& batch) noexcept override { take(-1, batch); }
  bool lendable() const noexcept override { return true; }
  void poll(std::vector<ready_event>& batch) noexcept override { take(0, batch); }

  void end_batch() noexcept override {
    {
      std::lock_guard g(retire_lock_);
      releasing_.swap(retired_);
    }
    for (readiness_target* t : releasing_) t->release();
    releasing_.clear();  // keeps its capacity: the next swap gives detach() room without allocating
  }

 private:
  // One epoll_wait (timeout_ms: -1 blocks, 0 returns at once) and its events into batch.
  void take(int timeout_ms, std::vector<ready_event>& batch) noexcept {
    const int n = sys_epoll_wait(epoll_fd_, events_.get(), static_cast<int>(kMaxBatch), timeout_ms);
    if (n < 0) return;  // EINTR; nothing else can fail on a valid epoll descriptor
    bool woken = false;
    for (int i = 0; i < n; ++i) {
      auto* t = static_cast<readiness_target*>(events_[i].data.ptr);
      if (t == nullptr) {
        woken = true;
        continue;
      }
      batch.push_back({t, readiness_from_poll_bits(events_[i].events)});  // within the reserve
    }
    if (woken) {
      std::uint64_t drained;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &drained, sizeof drained);
    }
  }

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::unique_ptr<epoll_event[]> events_;
  std::mutex retire_lock_;
  std::vector<readiness_target*> retired_;
  std::vector<readiness_target*> releasing_;  // the poll duty holder's
};

}  // namespace

std::unique_ptr<readiness_source> make_epoll_source() { return std::make_unique<epoll_source>(); }

}  // namespace tpl::net::detail
