// The op-builder registry, OpShape accessors and run_op (build -> pack ->
// simulate -> unpack). Builders register through register_builtin_op_builders()
// (op_builder_list.cpp) rather than static initialisers alone: objects in a
// static library that nothing references are dropped by the linker, so their
// registrars would silently never run.
#include "tessera/kernels/op_builder.h"

#include <algorithm>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/tile_kernels.h"
#include "tessera/npu/validator.h"

namespace tessera::kernels {

void register_builtin_op_builders();  // op_builder_list.cpp

int64_t OpShape::dim(const std::string& key) const {
  auto it = dims.find(key);
  if (it == dims.end()) {
    std::vector<std::string> have;
    for (const auto& [k, v] : dims) have.push_back(k);
    throw_error<UsageError>("op '{}': dim '{}' is missing (has: {})", op, key,
                            fmt::join(have, ", "));
  }
  return it->second;
}

double OpShape::attr(const std::string& key, double fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second;
}

std::string OpShape::key() const {
  // std::map iterates in key order, so the text is stable.
  std::string s = op;
  for (const auto& [k, v] : dims) s += fmt::format(" {}={}", k, v);
  for (const auto& [k, v] : attrs) s += fmt::format(" {}={}", k, v);
  return s;
}

namespace {

std::map<std::string, std::unique_ptr<OpBuilder>>& builders() {
  static std::map<std::string, std::unique_ptr<OpBuilder>> m;
  return m;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, [] { register_builtin_op_builders(); });
}

}  // namespace

std::vector<TileOptions> OpBuilder::tile_candidates(const OpShape&, const npu::DeviceSpec&) const {
  return {};
}

void register_op_builder(std::unique_ptr<OpBuilder> b) {
  TESSERA_CHECK(b != nullptr, "null builder");
  std::lock_guard lock(registry_mutex());
  std::string name = b->op();
  builders()[name] = std::move(b);
}

const OpBuilder& op_builder(const std::string& op) {
  ensure_builtins();
  std::lock_guard lock(registry_mutex());
  auto it = builders().find(op);
  if (it == builders().end()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : builders()) names.push_back(k);
    throw_error<UsageError>("no design builder for op '{}' (known: {})", op, fmt::join(names, ", "));
  }
  return *it->second;
}

std::vector<std::string> op_names() {
  ensure_builtins();
  std::lock_guard lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [k, v] : builders()) names.push_back(k);
  return names;
}

void ensure_tile_kernels_registered() {
  static std::once_flag once;
  std::call_once(once, [] { register_tile_kernels(npu::KernelRegistry::global()); });
}

void validate_design(const npu::Design& design, const npu::DeviceSpec& spec) {
  ensure_tile_kernels_registered();
  npu::validate(design, spec, npu::KernelRegistry::global());
}

namespace {

const npu::HostBuffer& declared(const npu::Design& design, const std::string& name) {
  for (const auto& h : design.host_buffers)
    if (h.name == name) return h;
  throw_error<InternalError>("design '{}' declares no host buffer '{}'", design.name, name);
}

}  // namespace

std::span<std::byte> host_bytes(const npu::Design& design, const std::string& name,
                                npu::HostMemory& host) {
  const npu::HostBuffer& h = declared(design, name);
  auto& v = host[name];
  if (v.size() != static_cast<size_t>(h.bytes)) v.assign(static_cast<size_t>(h.bytes), std::byte{0});
  return v;
}

std::span<const std::byte> host_bytes(const npu::Design& design, const std::string& name,
                                      const npu::HostMemory& host) {
  const npu::HostBuffer& h = declared(design, name);
  auto it = host.find(name);
  if (it == host.end() || it->second.size() != static_cast<size_t>(h.bytes))
    throw_error<InternalError>("design '{}': host buffer '{}' is missing or not {} bytes",
                               design.name, name, h.bytes);
  return it->second;
}

void check_tile_keys(const std::string& op_key, const std::map<std::string, int64_t>& tiles,
                     std::initializer_list<const char*> known) {
  for (const auto& [key, value] : tiles) {
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (!ok)
      throw_error<UsageError>("{}: unknown tile option '{}' (known: {})", op_key, key,
                              fmt::join(known, ", "));
  }
}

void check_numel(const std::string& op_key, const std::string& tensor, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) != want)
    throw_error<UsageError>("{}: tensor '{}' has {} values, the op needs {}", op_key, tensor, got,
                            want);
}

namespace {

// Largest divisor of n that is <= limit.
int64_t divisor_upto(int64_t n, int64_t limit) {
  for (int64_t d = std::min(n, limit); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

}  // namespace

npu::AccessPattern span_pattern(int64_t offset, int64_t elems, int64_t buffer_elems,
                                int64_t repeat, const npu::DeviceSpec& spec,
                                const std::string& what) {
  npu::AccessPattern p;
  p.offset = offset;
  p.repeat = repeat;
  if (offset == 0 && elems == buffer_elems) return p;
  int64_t w = divisor_upto(elems, spec.bd_max_wrap);
  int64_t rest = elems / w;
  if (rest == 1) {
    p.dims = {{w, 1}};
  } else if (rest <= spec.bd_max_size && spec.shim.bd_dims >= 2) {
    p.dims = {{rest, w}, {w, 1}};
  } else {
    int64_t b = divisor_upto(rest, std::min(spec.bd_max_size, spec.bd_max_stride / w));
    int64_t a = rest / b;
    if (a > spec.bd_max_size || spec.shim.bd_dims < 3 || a * b * w != elems)
      throw_error<LimitError>("{}: a run of {} elements cannot be one shim BD ({} dims, wrap <= "
                              "{}, size <= {}, stride <= {})", what, elems, spec.shim.bd_dims,
                              spec.bd_max_wrap, spec.bd_max_size, spec.bd_max_stride);
    p.dims = {{a, b * w}, {b, w}, {w, 1}};
  }
  return p;
}

OpRun run_op(const BuiltOp& built, const std::vector<std::vector<float>>& inputs,
             const npu::DeviceSpec& spec) {
  if (inputs.size() != built.inputs.size())
    throw_error<UsageError>("{}: run_op got {} inputs, the op takes {}", built.shape.key(),
                            inputs.size(), built.inputs.size());
  ensure_tile_kernels_registered();
  npu::HostMemory host;
  // Every declared buffer exists zero-filled first: padding regions that no
  // input writes must read as zeros, whatever order pack() runs in.
  for (const auto& h : built.design.host_buffers) host_bytes(built.design, h.name, host);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_numel(built.shape.key(), built.inputs[i].name, inputs[i].size(),
                shape_numel(built.inputs[i].shape));
    built.pack(i, inputs[i], host);
  }
  OpRun run;
  npu::Simulator sim(spec, npu::KernelRegistry::global());
  run.stats = built.patch ? sim.run(built.patch(built.design, host), host)
                          : sim.run(built.design, host);
  for (size_t o = 0; o < built.outputs.size(); ++o) run.outputs.push_back(built.unpack(o, host));
  return run;
}

}  // namespace tessera::kernels
