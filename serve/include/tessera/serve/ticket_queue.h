#pragma once
// One NPU, one Session: requests take turns on it in arrival order. A
// std::mutex promises no order among waiters, so this is a ticket lock: each
// caller draws the next number and waits until it is served.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace tessera::serve {

class TicketQueue {
 public:
  // Held while a request owns the Session; destroying it serves the next ticket.
  class Turn {
   public:
    explicit Turn(TicketQueue& q) : q_(q) {}
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    TicketQueue& q_;
  };

  // Draws a ticket and blocks until every earlier ticket's Turn is gone.
  std::unique_ptr<Turn> wait_turn();
  // Tickets drawn but not yet served (the one being served included).
  int64_t queued() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_ = 0, serving_ = 0;
};

}  // namespace tessera::serve
