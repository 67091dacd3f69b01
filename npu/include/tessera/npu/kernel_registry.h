#pragma once
// Tile kernels known to the simulator and the timing model, by name. A kernel
// has a functional body on whole L1 objects, a cycle cost derived from its
// vector work and the DeviceSpec, and its MAC count (for utilization).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"

namespace tessera::npu {

struct KernelInvocation {
  // One span per call arg, in order: the acquired object or local buffer bytes.
  std::vector<std::span<std::byte>> args;
  const KernelParams* params = nullptr;
  // KernelDef::bind's result for this call's params, when the kernel has one.
  const void* bound = nullptr;
  // Host bytes later calls read, for a kernel that prefetches as it runs
  // (KernelDef::prefetches_ahead), empty otherwise: the next call's into L1,
  // and a call further on's into L2.
  std::span<const std::byte> ahead;
  std::span<const std::byte> ahead_far;

  int64_t int_param(const std::string& key) const;     // throws naming the key
  double float_param(const std::string& key) const;
};

// Cycles of one kernel call split by the unit that spends them; the timing
// model names a compute-bound launch after the largest part of its busiest
// tile: "compute" (matrix unit, its per-loop overhead included), "vector"
// (non-MAC work on the vector unit) or "overhead" (the fixed per-call cost).
struct KernelCost {
  double mac = 0, vector = 0, overhead = 0;
  double total() const { return mac + vector + overhead; }
  KernelCost& operator+=(const KernelCost& o) {
    mac += o.mac, vector += o.vector, overhead += o.overhead;
    return *this;
  }
  friend KernelCost operator+(KernelCost a, const KernelCost& b) { return a += b; }
  friend KernelCost operator*(double n, KernelCost c) { return {n * c.mac, n * c.vector, n * c.overhead}; }
};

struct KernelDef {
  std::string name;
  std::function<void(const KernelInvocation&)> run;
  // Total cycles (the simulator's count); `cost` splits them for the timing
  // model (absent: all matrix-unit cycles).
  std::function<int64_t(const KernelParams&, const DeviceSpec&)> cycles;
  std::function<int64_t(const KernelParams&)> macs;  // 0 for non-MAC kernels
  std::function<KernelCost(const KernelParams&, const DeviceSpec&)> cost = nullptr;
  // Bit i set: the body only reads arg i, never writes it. The simulator may
  // then hand that arg bytes it does not own (a weight object read in place
  // from the host view instead of copied into L1). 0 = no promise.
  uint32_t read_only_args = 0;
  // Optional: the params parsed and checked once per program instruction
  // (the simulator calls it when it compiles a core); run() then reads the
  // result from KernelInvocation::bound instead of parsing the params on
  // every call. A decode token makes millions of GEMV calls of a few hundred
  // MACs, where a lookup of three params by name costs as much as the MACs.
  std::function<std::shared_ptr<const void>(const KernelParams&)> bind = nullptr;
  // Optional, with bind: run() for a replay (simulator_trace.h), which hands
  // it exactly the args a checked run() of the same instruction accepted
  // (the same bound params, the same arg sizes and alignments), so it may
  // skip run()'s checks. A plain function: a decode token replays about
  // 300 000 calls of a few hundred MACs, where the std::function call and
  // the per-arg size checks cost as much as a tenth of the call.
  void (*replay)(const KernelInvocation&) = nullptr;
  // run() prefetches KernelInvocation::ahead spread over its own reads; a
  // replay then hands it the next call's bytes instead of prefetching them
  // all before the call.
  bool prefetches_ahead = false;
  bool reads_only(size_t arg) const { return arg < 32 && ((read_only_args >> arg) & 1u) != 0; }
};

class KernelRegistry {
 public:
  static KernelRegistry& global();
  void add(KernelDef def);                          // replaces an existing name
  const KernelDef& get(const std::string& name) const;  // throws naming it
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, KernelDef> defs_;
};

}  // namespace tessera::npu
