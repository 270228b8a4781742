#include "tpl/exceptions.hpp"

namespace tpl {

namespace {
// The default message, built once: a default operation_canceled copies it (copying a
// std::runtime_error shares its buffer and cannot throw), so that constructor stays noexcept for
// the completion paths that build one where nothing may throw. A function-local static, so that
// another translation unit's static initializer may construct an operation_canceled too.
const std::runtime_error& canceled_message() {
  static const std::runtime_error message("The operation was canceled.");
  return message;
}
// Built during start-up, so the first cancellation does not allocate.
[[maybe_unused]] const std::runtime_error& g_canceled_message_at_start_up = canceled_message();
}  // namespace

operation_canceled::operation_canceled() noexcept : std::runtime_error(canceled_message()) {}

namespace {
std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "non-standard exception";
  }
}

std::string make_message(const std::vector<std::exception_ptr>& inner) {
  std::string m = "One or more errors occurred.";
  for (const auto& e : inner) {
    m += " (";
    m += describe(e);
    m += ")";
  }
  return m;
}
}  // namespace

aggregate_exception::aggregate_exception(std::vector<std::exception_ptr> inner)
    : inner_(std::move(inner)) {
  if (inner_.empty()) throw std::invalid_argument("aggregate_exception needs at least one exception");
  for (const auto& e : inner_)
    if (!e) throw std::invalid_argument("aggregate_exception: null exception_ptr");
  message_ = make_message(inner_);
}

namespace {
constexpr const char* kChannelClosedMessage = "The channel has been closed.";
std::string channel_closed_message(const std::string& base, const std::exception_ptr& inner) {
  if (!inner) return base;
  return base + " (" + describe(inner) + ")";
}
}  // namespace

channel_closed::channel_closed() : invalid_operation(kChannelClosedMessage) {}
channel_closed::channel_closed(std::exception_ptr inner)
    : invalid_operation(channel_closed_message(kChannelClosedMessage, inner)), inner_(std::move(inner)) {}
channel_closed::channel_closed(const std::string& message, std::exception_ptr inner)
    : invalid_operation(channel_closed_message(message, inner)), inner_(std::move(inner)) {}

}  // namespace tpl
