#include "tessera/kernels/kernel_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tessera::kernels {
namespace {

const npu::ParamValue* find(const npu::KernelParams& p, const std::string& key) {
  auto it = p.find(key);
  return it == p.end() ? nullptr : &it->second;
}

}  // namespace

int64_t param_int_or(const npu::KernelParams& p, const std::string& key, int64_t fallback,
                     const char* kernel) {
  const npu::ParamValue* v = find(p, key);
  if (!v) return fallback;
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  throw_error<KernelArgError>("kernel {}: param '{}' must be an integer", kernel, key);
}

// One lookup: kernels read their params on every call, thousands per token.
int64_t param_int(const npu::KernelParams& p, const std::string& key, const char* kernel) {
  const npu::ParamValue* v = find(p, key);
  if (!v) throw_error<KernelArgError>("kernel {}: missing param '{}'", kernel, key);
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  throw_error<KernelArgError>("kernel {}: param '{}' must be an integer", kernel, key);
}

int64_t param_in(const npu::KernelParams& p, const std::string& key, int64_t lo, int64_t hi,
                 const char* kernel) {
  int64_t v = param_int(p, key, kernel);
  if (v < lo || v > hi) {
    throw_error<KernelArgError>("kernel {}: param '{}' = {} outside [{}, {}]", kernel, key, v,
                                lo, hi);
  }
  return v;
}

double param_float_or(const npu::KernelParams& p, const std::string& key, double fallback,
                      const char* kernel) {
  const npu::ParamValue* v = find(p, key);
  if (!v) return fallback;
  if (const auto* d = std::get_if<double>(v)) return *d;
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  throw_error<KernelArgError>("kernel {}: param '{}' must be a number", kernel, key);
}

std::string param_str_or(const npu::KernelParams& p, const std::string& key,
                         const std::string& fallback, const char* kernel) {
  const npu::ParamValue* v = find(p, key);
  if (!v) return fallback;
  if (const auto* s = std::get_if<std::string>(v)) return *s;
  throw_error<KernelArgError>("kernel {}: param '{}' must be a string", kernel, key);
}

std::byte* arg_bytes(const npu::KernelInvocation& inv, size_t i, int64_t bytes, size_t align,
                     const char* kernel, const char* arg) {
  if (i >= inv.args.size()) {
    throw_error<KernelArgError>("kernel {}: arg {} ('{}') missing, got {} args", kernel, i, arg,
                                inv.args.size());
  }
  std::span<std::byte> s = inv.args[i];
  if (bytes < 0 || static_cast<int64_t>(s.size()) < bytes) {
    throw_error<KernelArgError>("kernel {}: arg {} ('{}') has {} bytes, params need {}", kernel,
                                i, arg, s.size(), bytes);
  }
  if (reinterpret_cast<uintptr_t>(s.data()) % align != 0) {
    throw_error<KernelArgError>("kernel {}: arg {} ('{}') is not {}-byte aligned", kernel, i,
                                arg, align);
  }
  return s.data();
}

Cost vector_cycles(int64_t elements, double ops, const npu::DeviceSpec& spec) {
  const int64_t lanes = spec.vector_lanes_bf16;
  const double rate = std::min<double>(spec.vector_lanes_per_cycle, static_cast<double>(lanes));
  return {0, static_cast<double>(round_up(elements, lanes)) * ops / rate, 0};
}

Cost vector_cycles(int64_t elements, const VectorOps& ops, const npu::DeviceSpec& spec) {
  return vector_cycles(elements,
                       ops.elementwise + ops.exp * spec.vector_exp_ops + ops.inv * spec.vector_inv_ops,
                       spec);
}

Cost fixed_cycles(int64_t cycles) { return {0, static_cast<double>(cycles), 0}; }

Cost mmul_cycles(int64_t m, int64_t k, int64_t n, const npu::DeviceSpec& spec) {
  auto blocks = [](int64_t v, int64_t b) { return (v + b - 1) / b; };
  const int64_t bm = blocks(m, spec.mmul_m), bk = blocks(k, spec.mmul_k), bn = blocks(n, spec.mmul_n);
  const double per_instr = static_cast<double>(spec.mmul_m * spec.mmul_k * spec.mmul_n) /
                           spec.macs_per_cycle_bf16;
  const double loops = static_cast<double>(blocks(bm, 2) * blocks(bn, 2));
  return {static_cast<double>(bm * bk * bn) * per_instr + loops * spec.mmul_loop_overhead_cycles,
          0, 0};
}

Cost copy_cycles(int64_t bytes, const npu::DeviceSpec& spec) {
  int64_t per_cycle = 2LL * spec.vector_lanes_bf16;  // one bf16 vector store
  return fixed_cycles((bytes + per_cycle - 1) / per_cycle);
}

TileKernel make_tile_kernel(const std::string& name, RunFn run, CyclesFn cycles,
                            ParamsFn l1_bytes, ParamsFn macs) {
  npu::KernelDef def;
  def.name = name;
  def.run = std::move(run);
  def.cost = [cycles = std::move(cycles)](const npu::KernelParams& p, const npu::DeviceSpec& s) {
    return Cost{0, 0, s.core_call_overhead_cycles} + cycles(p, s);
  };
  def.cycles = [cost = def.cost](const npu::KernelParams& p, const npu::DeviceSpec& s) {
    return std::llround(cost(p, s).total());
  };
  def.macs = macs ? std::move(macs) : [](const npu::KernelParams&) { return int64_t{0}; };
  return {std::move(def), std::move(l1_bytes)};
}

}  // namespace tessera::kernels
