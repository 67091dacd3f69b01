#pragma once
// Tile kernels known to the simulator and the timing model, by name. A kernel
// has a functional body on whole L1 objects, a cycle cost derived from its
// vector work and the DeviceSpec, and its MAC count (for utilization).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
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

  int64_t int_param(const std::string& key) const;     // throws naming the key
  double float_param(const std::string& key) const;
};

struct KernelDef {
  std::string name;
  std::function<void(const KernelInvocation&)> run;
  std::function<int64_t(const KernelParams&, const DeviceSpec&)> cycles;
  std::function<int64_t(const KernelParams&)> macs;  // 0 for non-MAC kernels
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
