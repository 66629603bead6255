#include "api/diagnostics/board_look.h"

#include "api/store/internal/call_deadline.h"

namespace distcomm {
namespace internal {

IdleLook read_idle_look(Store& board, const std::string& request_key, const std::string& failure_key,
                        std::chrono::milliseconds answer_wait, const std::function<void()>& unanswered) {
  std::vector<std::optional<Store::Bytes>> values;
  try {
    StoreCallDeadline bounded(std::chrono::steady_clock::now() + answer_wait, "the stall watch's look at the board");
    values = read_present(board, {request_key, failure_key});
  } catch (const StoreCallCutShort& e) {
    // Not when the call waited behind another thread's request (that one may be a long
    // wait the server answers in time) or was never made.
    if (e.where() == StoreCallCutShort::kInTheCall) unanswered();
    throw;
  }
  IdleLook look;
  if (values.at(0)) look.requests = std::stoll(to_string(*values[0]));  // add()'s decimal text
  if (values.at(1)) look.failure_record = to_string(*values[1]);
  return look;
}

std::string look_failure_text(const std::exception& e) {
  if (!dynamic_cast<const StoreCallCutShort*>(&e)) return e.what();
  return std::string("the store's server did not answer (its process stopped, its host froze, or the network "
                     "between this host and it is down): ") +
         e.what();  // which names the store's address
}

}  // namespace internal
}  // namespace distcomm
