// tpl/net.hpp — everything in tpl::net: sockets on tpl's socket engine (docs/io.md).
//
//   #include <tpl/net.hpp>
//   tpl::task<> serve(tpl::net::tcp_listener& l, tpl::cancellation_token token) {
//     for (;;) {
//       tpl::net::tcp_socket conn = co_await l.accept_async(token);
//       echo(std::move(conn));          // a task<> per connection
//     }
//   }
#pragma once

#include "tpl/net/endpoint.hpp"
#include "tpl/net/ip_address.hpp"
#include "tpl/net/network_stream.hpp"
#include "tpl/net/resolve.hpp"
#include "tpl/net/socket_base.hpp"
#include "tpl/net/socket_error.hpp"
#include "tpl/net/socket_stats.hpp"
#include "tpl/net/stream_socket.hpp"
#include "tpl/net/tcp_listener.hpp"
#include "tpl/net/tcp_socket.hpp"
#include "tpl/net/udp_socket.hpp"
#include "tpl/net/unix_socket.hpp"
