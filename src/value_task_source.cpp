// The cold paths of tpl/value_task_source.hpp: the misuse reports.
#include "tpl/value_task_source.hpp"

#include <string>

namespace tpl::detail {

void throw_value_task_source_misuse(const char* what) {
  throw invalid_operation(std::string("tpl: value_task_source: ") + what);
}

void throw_stale_value_task_token(std::uint32_t token, std::uint32_t version) {
  throw invalid_operation("tpl: value_task_source: a value_task for operation " + std::to_string(token) +
                          " used after its source moved on to operation " + std::to_string(version) +
                          " (awaited twice, or awaited after the source was reset)");
}

}  // namespace tpl::detail
