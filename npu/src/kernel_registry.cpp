#include "tessera/npu/kernel_registry.h"

#include <variant>

#include "tessera/npu/errors.h"

namespace tessera::npu {
namespace {

const ParamValue& find_param(const KernelParams* params, const std::string& key) {
  if (!params) throw_error<DesignError>("kernel parameter '{}': the call has no parameters", key);
  auto it = params->find(key);
  if (it == params->end()) {
    std::string have;
    for (const auto& [k, v] : *params) have += (have.empty() ? "" : ", ") + k;
    throw_error<DesignError>("kernel parameter '{}' missing (call has: {})", key, have.empty() ? "none" : have);
  }
  return it->second;
}

}  // namespace

int64_t KernelInvocation::int_param(const std::string& key) const {
  const ParamValue& v = find_param(params, key);
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  throw_error<DesignError>("kernel parameter '{}' is not an integer", key);
}

double KernelInvocation::float_param(const std::string& key) const {
  const ParamValue& v = find_param(params, key);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  throw_error<DesignError>("kernel parameter '{}' is not a number", key);
}

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry r;
  return r;
}

void KernelRegistry::add(KernelDef def) {
  if (def.name.empty() || !def.run) throw_error<DesignError>("kernel registration needs a name and a run function");
  std::string name = def.name;
  defs_[name] = std::move(def);
}

const KernelDef& KernelRegistry::get(const std::string& name) const {
  auto it = defs_.find(name);
  if (it == defs_.end()) throw_error<DesignError>("kernel '{}' is not registered ({} kernels known)", name, defs_.size());
  return it->second;
}

bool KernelRegistry::contains(const std::string& name) const { return defs_.count(name) != 0; }

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : defs_) out.push_back(k);
  return out;
}

}  // namespace tessera::npu
