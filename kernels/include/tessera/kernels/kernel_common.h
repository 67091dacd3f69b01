#pragma once
// What every tile kernel shares: its typed error, the reading of KernelParams
// and of byte-span args, and the cost vocabulary (vector ops at the DeviceSpec's
// lane count, MACs at its MAC rate, a documented per-call overhead).
//
// Numerics contract (DESIGN.md): bf16 in, fp32 accumulation, bf16 out with
// round-to-nearest-even (core/bf16.h). Accumulator objects that live across
// calls (GEMM partial sums, attention running state) stay fp32.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/kernel_registry.h"

namespace tessera::kernels {

// A kernel called with params it does not support, or with an L1 object too
// small / misaligned for its params. It is a design limit (the builder chose the
// objects), so it maps to the limit exit code; the message names the kernel,
// the arg or param, and the limit.
struct KernelArgError : LimitError {
  using LimitError::LimitError;
};

// Params. `kernel` only serves the error message.
int64_t param_int(const npu::KernelParams& p, const std::string& key, const char* kernel);
int64_t param_int_or(const npu::KernelParams& p, const std::string& key, int64_t fallback,
                     const char* kernel);
double param_float_or(const npu::KernelParams& p, const std::string& key, double fallback,
                      const char* kernel);
std::string param_str_or(const npu::KernelParams& p, const std::string& key,
                         const std::string& fallback, const char* kernel);
// param_int that must lie in [lo, hi].
int64_t param_in(const npu::KernelParams& p, const std::string& key, int64_t lo, int64_t hi,
                 const char* kernel);

// The i-th arg viewed as `count` elements of T. Throws KernelArgError when the
// arg is missing, shorter than count * sizeof(T), or not aligned for T.
std::byte* arg_bytes(const npu::KernelInvocation& inv, size_t i, int64_t bytes, size_t align,
                     const char* kernel, const char* arg);
template <class T>
T* arg_ptr(const npu::KernelInvocation& inv, size_t i, int64_t count, const char* kernel,
           const char* arg) {
  return reinterpret_cast<T*>(arg_bytes(inv, i, count * static_cast<int64_t>(sizeof(T)),
                                        alignof(T), kernel, arg));
}

// Cost vocabulary: every cost is an npu::KernelCost split by unit (matrix,
// vector, per-call overhead), all rates from the DeviceSpec. Every kernel made
// by make_tile_kernel pays spec.core_call_overhead_cycles per call (prologue,
// loop setup, lock acquire/release). The timing model divides by
// DeviceSpec::efficiency(kernel) (1 unless a spec says otherwise).
using Cost = npu::KernelCost;

// Non-MAC work per vector, in op classes whose cost the DeviceSpec states:
// elementwise ops (add, mul, max, compare, convert) cost 1, exp costs
// spec.vector_exp_ops, reciprocal / rsqrt spec.vector_inv_ops.
struct VectorOps {
  double elementwise = 0, exp = 0, inv = 0;
};
// ceil(elements / vector_lanes_bf16) vectors, each op retiring
// spec.vector_lanes_per_cycle lanes per cycle (load/compute/store pipelined:
// `ops` counts the non-overlapped compute ops per vector).
Cost vector_cycles(int64_t elements, double ops, const npu::DeviceSpec& spec);
Cost vector_cycles(int64_t elements, const VectorOps& ops, const npu::DeviceSpec& spec);
// Fixed scalar / fold work (a row's lane fold, one invsqrt), on the vector unit.
Cost fixed_cycles(int64_t cycles);
// One online-softmax score: max, subtract, exp, sum and the scale of the
// running output (flash / decode attention, softmax).
inline constexpr VectorOps kSoftmaxOps{4, 1, 0};
// An m x k x n block on the matrix unit: one mmul_m x mmul_k x mmul_n
// instruction per cycle at spec.macs_per_cycle_bf16 (edges padded to the
// instruction), in inner K loops over 2 x 2 instructions' outputs that each
// pay spec.mmul_loop_overhead_cycles: a short K or a thin tile is less
// efficient than a big one.
Cost mmul_cycles(int64_t m, int64_t k, int64_t n, const npu::DeviceSpec& spec);
// Plain copies at one lane-wide vector store per cycle.
Cost copy_cycles(int64_t bytes, const npu::DeviceSpec& spec);

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// A registry entry plus the L1 bytes its args occupy for given params (the
// builders need this to place objects; KernelDef has no such field).
struct TileKernel {
  npu::KernelDef def;
  std::function<int64_t(const npu::KernelParams&)> l1_bytes;
};

using RunFn = std::function<void(const npu::KernelInvocation&)>;
using CyclesFn = std::function<Cost(const npu::KernelParams&, const npu::DeviceSpec&)>;
using ParamsFn = std::function<int64_t(const npu::KernelParams&)>;
// `cycles` excludes the per-call overhead (added here); `macs` null = 0 (a
// kernel without matrix-unit work).
TileKernel make_tile_kernel(const std::string& name, RunFn run, CyclesFn cycles,
                            ParamsFn l1_bytes, ParamsFn macs = nullptr);

}  // namespace tessera::kernels
