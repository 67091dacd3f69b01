// The canonical row-major variant of the row-wise dataflow (kernels/builders/
// rowwise.h): the fifos, links and core programs are the blocked variant's;
// only the host buffers and the runtime sequence differ.
#include <algorithm>
#include <map>
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

// Shim tasks of the busiest column over steps [s0, s0 + steps).
int64_t busiest_shim(const RowwiseSpec& s, const RowwisePlan& p, const npu::DeviceSpec& spec,
                     int64_t s0, int64_t steps);

// The gemm x output cuts a column's run into a task per group of the gemm's
// m rows, so the steps a launch holds are bounded by the shim's BDs.
int64_t gemm_x_steps_per_launch(const RowwiseSpec& s, const RowwisePlan& p,
                                const npu::DeviceSpec& spec) {
  RowwiseSpec plain = s;
  plain.gemm_x = {};
  const int64_t most = rowmajor_steps_per_launch(plain, p, spec);
  for (int64_t per = most; per >= 1; --per) {
    bool fits = true;
    for (int64_t s0 = 0; s0 < p.S && fits; s0 += per)
      fits = busiest_shim(s, p, spec, s0, std::min(per, p.S - s0)) <= spec.shim.buffer_descriptors;
    if (fits) return per;
  }
  throw_error<LimitError>("{}: one step of the gemm x output needs more than the {} shim BDs of {}",
                          s.what, spec.shim.buffer_descriptors, spec.name);
}

int64_t busiest_shim(const RowwiseSpec& s, const RowwisePlan& p, const npu::DeviceSpec& spec,
                     int64_t s0, int64_t steps) {
  npu::Launch l;
  add_rowmajor_io(l, s, p, spec, s0, steps);
  std::map<std::string, int64_t> per_column;  // fifo "in3" / "y3" -> column "3"
  for (const npu::DmaTask& t : l.sequence) ++per_column[t.fifo.substr(t.to_device ? 2 : 1)];
  int64_t most = 0;
  for (const auto& [c, n] : per_column) most = std::max(most, n + (c == "0" && s.const_elems ? 1 : 0));
  return most;
}

// Heads mode: a column's object of a step is m whole rows, which its mem
// tile splits into R column groups of wt, so the shim cuts the object out of
// the rows as [R][m][wt] (runs of wt elements; one 3-D task per step, since
// consecutive steps would need a fourth dimension).
npu::AccessPattern heads_object(const RowwiseSpec& s, const RowwisePlan& p, int64_t offset,
                                int64_t repeat, const npu::DeviceSpec& spec) {
  if (p.R == 1) return span_pattern(offset, object_elems(p), s.numel, repeat, spec, s.what);
  if (spec.shim.bd_dims < 3 || p.R > spec.bd_max_size || p.m > spec.bd_max_size ||
      p.wt > spec.bd_max_wrap || s.cols > spec.bd_max_stride)
    throw_error<LimitError>("{}: a heads object of {} groups x {} rows x {} columns (row stride "
                            "{}) exceeds the shim BDs of {} ({} dims, wrap <= {}, size <= {}, "
                            "stride <= {})", s.what, p.R, p.m, p.wt, s.cols, spec.name,
                            spec.shim.bd_dims, spec.bd_max_wrap, spec.bd_max_size,
                            spec.bd_max_stride);
  npu::AccessPattern a;
  a.offset = offset;
  a.repeat = repeat;
  a.dims = {{p.R, p.wt}, {p.m, s.cols}, {p.wt, 1}};
  return a;
}

void add_heads_io(npu::Launch& l, const RowwiseSpec& s, const RowwisePlan& p,
                  const npu::DeviceSpec& spec, int64_t s0, int64_t steps) {
  const int64_t side = 2 * p.m * s.side_cols;  // f32 per step: cos and sin rows
  for (int c = 0; c < p.C; ++c) {
    // Clamped steps past the end re-read one object: a repeat of its task.
    std::vector<Run> runs;
    for (int64_t st = s0; st < s0 + steps; ++st) {
      const int64_t at = object_start(s, p, c, st);
      if (!runs.empty() && runs.back().offset == at && runs.back().repeat < spec.bd_max_repeat)
        ++runs.back().repeat;
      else
        runs.push_back({at, 1, 1});
    }
    for (const Run& r : runs)
      l.sequence.push_back(b::to_device(fmt::format("in{}", c), rowmajor_in(0),
                                        heads_object(s, p, r.offset, r.repeat, spec)));
    if (s.side_cols)
      l.sequence.push_back(b::to_device(
          fmt::format("t{}", c), fmt::format("t_c{}", c),
          span_pattern(s0 * side, steps * side, p.S * side, 1, spec, s.what + " side table")));
    for (const Run& r : runs)
      l.sequence.push_back(b::from_device(fmt::format("y{}", c), "y_rows",
                                          heads_object(s, p, r.offset, r.repeat, spec)));
  }
}

}  // namespace

std::string rowmajor_in(int p) { return fmt::format("x{}_rows", p); }

void check_rowmajor(const RowwiseSpec& s, const RowwisePlan& p) {
  if ((!p.heads_mode && s.side_cols) || !s.out_host.empty())
    throw_error<LimitError>("{}: the row-major layout ({}) supports row blocks and heads mode "
                            "only, not side tables of row blocks or zero-copy outputs",
                            s.what, kRowMajorTile);
  // A padded head has no bytes in the row-major tensor to be cut from.
  if (p.heads_mode && (p.R * p.wt != s.cols || s.P != 1 || s.gemm_x.on()))
    throw_error<LimitError>("{}: the row-major layout ({}) in heads mode needs one stream whose "
                            "heads tile the {} rows exactly ({} x {} columns cover {}), and no gemm "
                            "x output", s.what, kRowMajorTile, p.R, p.R, p.wt, s.cols);
  if (s.numel < object_elems(p))
    throw_error<LimitError>("{}: the row-major layout needs at least one whole object of {} "
                            "elements ({} rows x {} x {} tiles); the tensor has {}",
                            s.what, object_elems(p), p.m, p.wt, p.R, s.numel);
}

int64_t rowmajor_steps_per_launch(const RowwiseSpec& s, const RowwisePlan& p,
                                  const npu::DeviceSpec& spec) {
  if (s.gemm_x.on()) return gemm_x_steps_per_launch(s, p, spec);
  if (p.heads_mode) {
    // A shim task in and one out per step (heads_object), plus the side
    // table's and the constant's task.
    const int64_t free =
        spec.shim.buffer_descriptors - (s.const_elems ? 1 : 0) - (s.side_cols ? 1 : 0);
    if (free < 2)
      throw_error<LimitError>("{}: one row-major heads step needs 2 shim BDs, {} has {} free",
                              s.what, spec.name, free);
    return std::min<int64_t>(free / 2, p.S);
  }
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
  if (p.heads_mode) return add_heads_io(l, s, p, spec, s0, steps);
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
    for (const Run& r : runs) {
      if (s.gemm_x.on()) {
        const size_t first = l.sequence.size();
        add_gemm_x_writes(l.sequence, y, s.gemm_x, r.offset, r.offset + r.objects * obj, r.repeat,
                          spec, s.what);
        // A task moves whole fifo objects: a group of the gemm's rows must
        // start and end on one of the producer's objects.
        for (size_t t = first; t < l.sequence.size(); ++t)
          if (l.sequence[t].pattern.elements_per_repeat() % obj != 0)
            throw_error<LimitError>("{}: the gemm x layout (m={}) cuts an object of {} elements "
                                    "(rows of {} blocks do not fall on the producer's objects)",
                                    s.what, s.gemm_x.m, obj, s.gemm_x.m);
        continue;
      }
      l.sequence.push_back(b::from_device(
          y, "y_rows",
          span_pattern(r.offset, r.objects * obj, s.numel, r.repeat, spec, s.what + " out rows")));
    }
  }
}

}  // namespace tessera::kernels
