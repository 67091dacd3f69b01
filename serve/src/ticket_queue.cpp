#include "tessera/serve/ticket_queue.h"

namespace tessera::serve {

TicketQueue::Turn::~Turn() {
  {
    const std::lock_guard<std::mutex> lock(q_.mu_);
    ++q_.serving_;
  }
  q_.cv_.notify_all();
}

std::unique_ptr<TicketQueue::Turn> TicketQueue::wait_turn() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t ticket = next_++;
  cv_.wait(lock, [&] { return serving_ == ticket; });
  return std::make_unique<Turn>(*this);
}

int64_t TicketQueue::queued() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return next_ - serving_;
}

}  // namespace tessera::serve
