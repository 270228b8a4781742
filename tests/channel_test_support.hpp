// Channel test helpers shared by channel_test.cpp and channel_ring_test.cpp: each channel
// operation as a task (called on the test thread, it runs until it waits inside the channel, so
// it is queued when the call returns), and draining what is buffered.
#pragma once

#include <utility>
#include <vector>

#include <tpl/channel.hpp>
#include <tpl/tpl.hpp>

namespace tpl_test {

template <class T>
tpl::task<T> read_one(tpl::channel_reader<T> r, tpl::cancellation_token token = {}) {
  co_return co_await r.read_async(token);
}

template <class T>
tpl::task<> write_one(tpl::channel_writer<T> w, T v, tpl::cancellation_token token = {}) {
  co_await w.write_async(std::move(v), token);
}

template <class T>
tpl::task<bool> wait_to_read(tpl::channel_reader<T> r, tpl::cancellation_token token = {}) {
  co_return co_await r.wait_to_read_async(token);
}

template <class T>
tpl::task<bool> wait_to_write(tpl::channel_writer<T> w, tpl::cancellation_token token = {}) {
  co_return co_await w.wait_to_write_async(token);
}

/// Every item try_read returns now, in order.
template <class T>
std::vector<T> drain(tpl::channel_reader<T> r) {
  std::vector<T> out;
  while (auto v = r.try_read()) out.push_back(std::move(*v));
  return out;
}

}  // namespace tpl_test
