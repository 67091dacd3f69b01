// The canonical row-major variant of the row-wise dataflow (kernels/builders/
// rowwise.h): the fifos, links and core programs are the blocked variant's;
// only the host buffers and the runtime sequence differ.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/rowwise.h"
#include "tessera/npu/builder.h"

namespace tessera::kernels {
namespace {

namespace b = npu::build;

// A run of the sequence: `objects` contiguous objects from `offset`, issued
// `repeat` times (objects past the end all re-read the last whole one).
struct Run {
  int64_t offset = 0, objects = 1, repeat = 1;
};

int64_t object_elems(const RowwisePlan& p) { return p.R * p.m * p.wt; }

int64_t object_start(const RowwiseSpec& s, const RowwisePlan& p, int c, int64_t st) {
  const int64_t obj = object_elems(p);
  return std::min((c * p.S + st) * obj, s.numel - obj);
}

// Column c's objects in step order, merged into as few runs as the BD limits
// allow: a step that follows its predecessor extends a run, one that re-reads
// it (the clamped tail) repeats it.
std::vector<Run> column_runs(const RowwiseSpec& s, const RowwisePlan& p, int c, int64_t s0,
                             int64_t steps, const npu::DeviceSpec& spec) {
  const int64_t obj = object_elems(p);
  std::vector<Run> runs;
  for (int64_t st = s0; st < s0 + steps; ++st) {
    const int64_t at = object_start(s, p, c, st);
    if (!runs.empty()) {
      Run& r = runs.back();
      if (r.repeat == 1 && at == r.offset + r.objects * obj) {
        ++r.objects;
        continue;
      }
      if (r.objects == 1 && at == r.offset && r.repeat < spec.bd_max_repeat) {
        ++r.repeat;
        continue;
      }
    }
    runs.push_back({at, 1, 1});
  }
  return runs;
}

}  // namespace

std::string rowmajor_in(int p) { return fmt::format("x{}_rows", p); }

void check_rowmajor(const RowwiseSpec& s, const RowwisePlan& p) {
  if (p.heads_mode || s.side_cols || !s.out_host.empty())
    throw_error<LimitError>("{}: the row-major layout ({}) supports plain row blocks only, not "
                            "heads mode, side tables or zero-copy outputs",
                            s.what, kRowMajorTile);
  if (s.numel < object_elems(p))
    throw_error<LimitError>("{}: the row-major layout needs at least one whole object of {} "
                            "elements ({} rows x {} x {} tiles); the tensor has {}",
                            s.what, object_elems(p), p.m, p.wt, p.R, s.numel);
}

int64_t rowmajor_steps_per_launch(const RowwiseSpec& s, const RowwisePlan& p,
                                  const npu::DeviceSpec& spec) {
  if (s.P == 1) return p.S;  // a column's objects merge into <= 2 runs each way
  // Shim 0: the constant's task, <= 2 output runs, then P tasks per step.
  const int64_t free = spec.shim.buffer_descriptors - (s.const_elems ? 1 : 0) - 2;
  if (free < s.P)
    throw_error<LimitError>("{}: one row-major step needs {} shim BDs, {} has {} free", s.what,
                            s.P, spec.name, free);
  return std::min<int64_t>(free / s.P, spec.bd_max_repeat);
}

void add_rowmajor_io(npu::Launch& l, const RowwiseSpec& s, const RowwisePlan& p,
                     const npu::DeviceSpec& spec, int64_t s0, int64_t steps) {
  check_rowmajor(s, p);
  const int64_t obj = object_elems(p);
  for (int c = 0; c < p.C; ++c) {
    const std::string in = fmt::format("in{}", c), y = fmt::format("y{}", c);
    const std::vector<Run> runs = column_runs(s, p, c, s0, steps, spec);
    if (s.P == 1) {
      for (const Run& r : runs)
        l.sequence.push_back(b::to_device(
            in, rowmajor_in(0),
            span_pattern(r.offset, r.objects * obj, s.numel, r.repeat, spec, s.what + " in rows")));
    } else {
      // The P streams alternate object by object in one fifo: one task each.
      for (int64_t st = s0; st < s0 + steps; ++st)
        for (int i = 0; i < s.P; ++i)
          l.sequence.push_back(b::to_device(
              in, rowmajor_in(i),
              span_pattern(object_start(s, p, c, st), obj, s.numel, 1, spec, s.what + " in rows")));
    }
    for (const Run& r : runs)
      l.sequence.push_back(b::from_device(
          y, "y_rows",
          span_pattern(r.offset, r.objects * obj, s.numel, r.repeat, spec, s.what + " out rows")));
  }
}

}  // namespace tessera::kernels
