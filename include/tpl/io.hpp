// tpl/io.hpp — everything in tpl::io: files (tpl/io/file.hpp), pipes (tpl/io/pipe.hpp), and the
// errors and engine choice they share (tpl/io/io_error.hpp). docs/io.md explains them.
//
//   #include <tpl/io.hpp>
//   auto f = tpl::io::file::open("log.txt", tpl::io::file_mode::append, tpl::io::file_access::write);
//   co_await f.write_async(std::as_bytes(std::span(std::string_view("started\n"))));
#pragma once

#include "tpl/io/file.hpp"
#include "tpl/io/io_error.hpp"
#include "tpl/io/pipe.hpp"
