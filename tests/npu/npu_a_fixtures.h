#pragma once
// Small hand-written designs and test kernels shared by the validator and
// simulator tests (engineer A's suites).
#include <cstdint>
#include <cstring>
#include <vector>

#include "tessera/npu/builder.h"
#include "tessera/npu/kernel_registry.h"

namespace tessera::npu::testing {

// "t_copy"(in, out): out = in.  "t_add_one"(in, out): u16 elements + 1.
// "t_acc"(in, acc) {n}: u32 acc[i] += u16 in[i] for i < n.  "t_zero"(acc): acc = 0.
// "t_store"(acc, out) {n}: u16 out[i] = acc[i].
inline KernelRegistry& test_kernels() {
  static KernelRegistry r = [] {
    KernelRegistry k;
    k.add({"t_copy", [](const KernelInvocation& inv) {
             std::memcpy(inv.args[1].data(), inv.args[0].data(), std::min(inv.args[0].size(), inv.args[1].size()));
           },
           [](const KernelParams&, const DeviceSpec&) -> int64_t { return 100; },
           [](const KernelParams&) -> int64_t { return 0; }});
    k.add({"t_add_one", [](const KernelInvocation& inv) {
             auto* in = reinterpret_cast<const uint16_t*>(inv.args[0].data());
             auto* out = reinterpret_cast<uint16_t*>(inv.args[1].data());
             for (size_t i = 0; i < inv.args[1].size() / 2; ++i) out[i] = static_cast<uint16_t>(in[i] + 1);
           },
           nullptr, nullptr});
    k.add({"t_acc", [](const KernelInvocation& inv) {
             int64_t n = inv.int_param("n");
             auto* in = reinterpret_cast<const uint16_t*>(inv.args[0].data());
             auto* acc = reinterpret_cast<uint32_t*>(inv.args[1].data());
             for (int64_t i = 0; i < n; ++i) acc[i] += in[i];
           },
           [](const KernelParams&, const DeviceSpec&) -> int64_t { return 10; },
           [](const KernelParams& p) -> int64_t { return std::get<int64_t>(p.at("n")); }});
    k.add({"t_zero", [](const KernelInvocation& inv) { std::memset(inv.args[0].data(), 0, inv.args[0].size()); },
           nullptr, nullptr});
    k.add({"t_store", [](const KernelInvocation& inv) {
             int64_t n = inv.int_param("n");
             auto* acc = reinterpret_cast<const uint32_t*>(inv.args[0].data());
             auto* out = reinterpret_cast<uint16_t*>(inv.args[1].data());
             for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(acc[i]);
           },
           nullptr, nullptr});
    return k;
  }();
  return r;
}

// host "in" -> shim (0,0) -> mem (0,1) -> compute (0,2) [kernel] -> mem (0,1)
// -> shim (0,0) -> host "out"; `objects` objects of `object_bytes`.
inline Design passthrough_design(int64_t objects = 4, int64_t object_bytes = 256, const char* kernel = "t_copy") {
  using namespace build;
  Design d;
  d.name = "passthrough";
  d.host_buffers = {{"in", objects * object_bytes, 2}, {"out", objects * object_bytes, 2}};
  Launch l;
  l.name = "main";
  l.fifos = {fifo("in_l2", {0, 0}, {{0, 1}}, object_bytes), fifo("in_l1", {0, 1}, {{0, 2}}, object_bytes),
             fifo("out_l1", {0, 2}, {{0, 1}}, object_bytes), fifo("out_l2", {0, 1}, {{0, 0}}, object_bytes)};
  l.links = {{{0, 1}, {"in_l2"}, {"in_l1"}, {}}, {{0, 1}, {"out_l1"}, {"out_l2"}, {}}};
  l.cores = {{{0, 2},
              {loop(objects, {acquire_in("in_l1"), acquire_out("out_l1"), call(kernel, {"in_l1", "out_l1"}),
                              release_in("in_l1"), release_out("out_l1")})}}};
  l.sequence = {to_device("in_l2", "in"), from_device("out_l2", "out")};
  d.launches = {l};
  return d;
}

inline std::vector<std::byte> iota_bytes(int64_t n_u16, uint16_t start = 1) {
  std::vector<std::byte> b(n_u16 * 2);
  for (int64_t i = 0; i < n_u16; ++i) {
    uint16_t v = static_cast<uint16_t>(start + i * 7);
    std::memcpy(b.data() + 2 * i, &v, 2);
  }
  return b;
}

inline uint16_t u16_at(const std::vector<std::byte>& b, int64_t i) {
  uint16_t v;
  std::memcpy(&v, b.data() + 2 * i, 2);
  return v;
}

}  // namespace tessera::npu::testing
