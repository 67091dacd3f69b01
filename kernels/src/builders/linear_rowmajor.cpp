// The gemm dataflow's x and y in the canonical row-major layout
// (kRowMajorTile, kernels/builders/linear.h): x [M, K] and y [M, N] each in
// one host buffer; the shim tasks cut the [m, k] and [R * m, n] blocks.
#include <algorithm>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/linear.h"
#include "tessera/npu/builder.h"

namespace tessera::kernels {
namespace {

namespace b = npu::build;

// Pattern dims outermost first; size-1 outer dims dropped (they move nothing).
npu::AccessPattern pattern(int64_t offset, std::vector<npu::Dim> dims, int64_t repeat) {
  npu::AccessPattern p;
  p.offset = offset;
  p.repeat = repeat;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].size > 1 || i + 1 == dims.size()) p.dims.push_back(dims[i]);
  return p;
}

}  // namespace

int64_t rowmajor_step_row(const LinearPlan& p, int64_t s) {
  return std::min(s * p.R * p.m, p.M - int64_t{p.R} * p.m);
}

void check_linear_rowmajor(const LinearPlan& p, const npu::DeviceSpec& spec) {
  auto refuse = [&](const char* why) {
    throw_error<LimitError>("linear M={} K={} N={}: the row-major layout ({}) {} (m={} k={} n={} "
                            "rows={} columns={})", p.M, p.K, p.N,
                            p.rowmajor ? kRowMajorTile : kRowMajorOutTile, why, p.m, p.k, p.n, p.R,
                            p.C);
  };
  if (!p.gemm) refuse("is built for the gemm dataflow only");
  if (p.rowmajor && p.panel)
    refuse("does not take the weight panel (its per-block x tasks exceed the shim BDs)");
  if (p.rowmajor && p.Kp() != p.K) refuse("needs K blocks that tile K exactly (x is read, not padded)");
  if (p.Np() != p.N) refuse("needs N blocks that tile N exactly (y is written, not padded)");
  if (p.M < int64_t{p.R} * p.m) refuse("needs M >= rows * m (the last step re-reads whole rows)");
  if (p.k > spec.bd_max_wrap || p.n > spec.bd_max_wrap || p.m > spec.bd_max_size ||
      p.kb > spec.bd_max_size || p.NB > spec.bd_max_size || p.R * p.m > spec.bd_max_size)
    refuse("has a block edge beyond the shim BD wrap / size limits");
}

int64_t rowmajor_tasks_per_step(const LinearPlan& p, const npu::DeviceSpec& spec) {
  const int64_t x = p.kb == 1 ? 1 : (p.NB + spec.bd_max_repeat - 1) / spec.bd_max_repeat;
  return x + 1;  // and one y task (R blocks x NB blocks of the step)
}

void add_rowmajor_sequence(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec,
                           int64_t s0, int64_t steps) {
  for (int64_t s = s0; s < s0 + steps; ++s) {
    const int64_t row0 = rowmajor_step_row(p, s);
    for (int r = 0; r < p.R; ++r) {
      // The step's kb blocks of [m, k]; re-streamed once per N block unless resident.
      const int64_t reps = p.kb == 1 ? 1 : p.NB;
      for (int64_t done = 0; done < reps; done += spec.bd_max_repeat)
        l.sequence.push_back(b::to_device(
            fmt::format("x{}", r), "x_rows",
            pattern((row0 + r * p.m) * p.K, {{p.kb, p.k}, {p.m, p.K}, {p.k, 1}},
                    std::min(spec.bd_max_repeat, reps - done))));
    }
    for (int c = 0; c < p.C; ++c) add_rowmajor_y(l, p, spec, c, {s, 1, 0, p.NB});
  }
}

int64_t rowmajor_row_split(const LinearPlan& p, int64_t steps, const npu::DeviceSpec& spec) {
  const int64_t unit = int64_t{p.R} * p.m;
  for (int64_t split = std::min(unit, spec.bd_max_size); split >= 1; --split)
    if (unit % split == 0 && split * p.N <= spec.bd_max_stride)
      return steps * unit / split <= spec.bd_max_size ? split : 0;
  return 0;
}

void add_rowmajor_y(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec, int c,
                    const LinearLaunch& at) {
  const std::string fifo = fmt::format("y{}", c);
  const int64_t row0 = rowmajor_step_row(p, at.s0);
  if (p.panel) {  // N blocks outer: per N block, the launch's steps (contiguous rows)
    const int64_t rows = at.steps * p.R * p.m, split = rowmajor_row_split(p, at.steps, spec);
    if (split == 0)
      throw_error<LimitError>("linear M={} K={} N={}: {} row-major y rows of a launch do not "
                              "split into shim BD dims", p.M, p.K, p.N, rows);
    for (int64_t bb = at.bb0; bb < at.bb0 + at.nbl; ++bb)
      l.sequence.push_back(b::from_device(
          fifo, "y_rows",
          pattern(row0 * p.N + (c * p.NB + bb) * p.n,
                  {{rows / split, split * p.N}, {split, p.N}, {p.n, 1}}, 1)));
    return;
  }
  const int64_t col0 = c * p.NB * p.n;
  for (int64_t s = at.s0; s < at.s0 + at.steps; ++s)  // per M step, its N blocks
    l.sequence.push_back(b::from_device(
        fifo, "y_rows",
        pattern(rowmajor_step_row(p, s) * p.N + col0, {{p.NB, p.n}, {p.R * p.m, p.N}, {p.n, 1}}, 1)));
}

}  // namespace tessera::kernels
