#include "tessera/serve/ticket_queue.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::serve {
namespace {

// Waiters are served in the order they drew tickets, not in whatever order a
// mutex would wake them. Each thread draws its ticket only after the previous
// one is known to be waiting (queued() grew), so the arrival order is fixed.
TEST(TicketQueue, ServesInArrivalOrder) {
  TicketQueue q;
  auto first = q.wait_turn();  // holds the Session while the others queue
  constexpr int kWaiters = 8;
  std::vector<int> order;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto turn = q.wait_turn();
      const std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
    while (q.queued() < i + 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(order.empty());
  first.reset();
  for (auto& t : threads) t.join();
  ASSERT_EQ(order.size(), static_cast<size_t>(kWaiters));
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_EQ(q.queued(), 0);
}

TEST(TicketQueue, OneTurnAtATime) {
  TicketQueue q;
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 20; ++k) {
        auto turn = q.wait_turn();
        most = std::max(most.load(), ++inside);
        std::this_thread::yield();
        --inside;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(most.load(), 1);
}

}  // namespace
}  // namespace tessera::serve
