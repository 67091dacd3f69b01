// The linear builder's gemv dataflow (decode and short prompts; see
// kernels/builders/linear.h): weight streams over every shim MM2S channel,
// x broadcast from shim 0 and resident in L1 when it fits.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/linear.h"
#include "tessera/npu/builder.h"

namespace tessera::kernels {
namespace {

using npu::CoreOp;
using npu::TileCoord;
namespace b = npu::build;


// Host buffers: x of every M step, one weight buffer per stream (column c,
// channel j), y per column.
std::string w_host(int c, int j) { return fmt::format("w_c{}_{}", c, j); }
std::string gemv_y_host(int c) { return fmt::format("y_c{}", c); }
constexpr const char* kXHost = "x_r0";

// Tiles of column c that compute (the tiles of its streams).
int active_rows(const LinearPlan& p, int c) { return p.streams_in(c) * p.T; }

int64_t x_object_elems(const LinearPlan& p) { return p.x_resident ? p.m * p.Kp() : p.m * p.k; }

void add_fifos(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec) {
  std::vector<TileCoord> all;
  for (int c = 0; c < p.C; ++c)
    for (int r = 0; r < active_rows(p, c); ++r) all.push_back(core_tile(spec, c, r));
  l.fifos.push_back(b::fifo("x", shim_tile(0), all, x_object_elems(p) * 2, p.x_resident ? 1 : 2));
  const int64_t wobj = p.n * p.k * 2, yobj = p.m * p.n * 2;
  for (int c = 0; c < p.C; ++c) {
    const int rows = active_rows(p, c);
    if (rows == 0) continue;
    for (int j = 0; j < p.streams_in(c); ++j) {
      std::string w = fmt::format("w{}_{}", c, j);
      l.fifos.push_back(b::fifo(w, shim_tile(c), {mem_tile(spec, c)}, p.T * wobj, 2));
      npu::Link split{mem_tile(spec, c), {w}, {}, {}};
      for (int t = 0; t < p.T; ++t) {
        std::string wt = fmt::format("w{}_{}_{}", c, j, t);
        l.fifos.push_back(b::fifo(wt, mem_tile(spec, c), {core_tile(spec, c, j * p.T + t)}, wobj, 2));
        split.outputs.push_back(wt);
        split.offsets_bytes.push_back(t * wobj);
      }
      l.links.push_back(std::move(split));
    }
    std::string y = fmt::format("y{}", c);
    npu::Link join{mem_tile(spec, c), {}, {y}, {}};
    for (int r = 0; r < rows; ++r) {
      std::string yr = fmt::format("y{}_{}", c, r);
      l.fifos.push_back(b::fifo(yr, core_tile(spec, c, r), {mem_tile(spec, c)}, yobj, 2));
      join.inputs.push_back(yr);
      join.offsets_bytes.push_back(r * yobj);
    }
    l.fifos.push_back(b::fifo(y, mem_tile(spec, c), {shim_tile(c)}, rows * yobj, 2));
    l.links.push_back(std::move(join));
  }
}

// One output block of a tile: kb K steps into the fp32 accumulator (or one
// fused gemv call for m = 1 with the whole K), then the bf16 y object. A
// resident x is read at the k block's offset; a streamed x arrives per step.
std::vector<CoreOp> block_program(const LinearPlan& p, const std::string& w, const std::string& y) {
  const bool vec = p.m == 1;
  auto params = [&](int64_t j) {
    const int64_t off = p.x_resident ? j * p.m * p.k : 0;
    return vec ? npu::KernelParams{{"n", p.n}, {"k", p.k}, {"x_off", off}}
               : npu::KernelParams{{"m", p.m}, {"k", p.k}, {"n", p.n},
                                   {"b_layout", std::string("nk")}, {"a_off", off}};
  };
  auto args = [&](const std::string& out) {
    return vec ? std::vector<std::string>{w, "x", out} : std::vector<std::string>{"x", w, out};
  };
  const npu::KernelParams fin{{"count", p.m * p.n}};
  if (p.kb == 1) {
    std::vector<CoreOp> ops = {b::acquire_in(w), b::acquire_out(y)};
    if (vec) {
      ops.push_back(b::call("gemv", args(y), params(0)));
    } else {
      ops.push_back(b::call("gemm_init", args("acc"), params(0)));
      ops.push_back(b::call("gemm_finalize", {"acc", y}, fin));
    }
    ops.insert(ops.end(), {b::release_in(w), b::release_out(y)});
    return ops;
  }
  auto step = [&](const char* kernel, int64_t j) {
    std::vector<CoreOp> s = {b::acquire_in(w), b::call(kernel, args("acc"), params(j)),
                             b::release_in(w)};
    if (!p.x_resident) {
      s.insert(s.begin(), b::acquire_in("x"));
      s.push_back(b::release_in("x"));
    }
    return s;
  };
  std::vector<CoreOp> ops = step(vec ? "gemv_init" : "gemm_init", 0);
  if (p.x_resident) {  // the offset differs per k block: unrolled
    for (int64_t j = 1; j < p.kb; ++j) {
      auto s = step(vec ? "gemv_acc" : "gemm_acc", j);
      ops.insert(ops.end(), s.begin(), s.end());
    }
  } else {
    ops.push_back(b::loop(p.kb - 1, step(vec ? "gemv_acc" : "gemm_acc", 0)));
  }
  ops.insert(ops.end(), {b::acquire_out(y), b::call("gemm_finalize", {"acc", y}, fin),
                         b::release_out(y)});
  return ops;
}

void add_cores(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec, int64_t steps) {
  const bool acc = !(p.m == 1 && p.kb == 1);
  for (int c = 0; c < p.C; ++c)
    for (int r = 0; r < active_rows(p, c); ++r) {
      TileCoord t = core_tile(spec, c, r);
      std::string w = fmt::format("w{}_{}_{}", c, r / p.T, r % p.T), y = fmt::format("y{}_{}", c, r);
      if (acc) l.buffers.push_back({"acc", t, p.m * p.n * 4, -1});
      std::vector<CoreOp> s_body;
      if (p.x_resident) s_body.push_back(b::acquire_in("x"));
      s_body.push_back(b::loop(p.NB, block_program(p, w, y)));
      if (p.x_resident) s_body.push_back(b::release_in("x"));
      l.cores.push_back({t, {b::loop(steps, std::move(s_body))}});
    }
}

// Column c's output object of block bb (its streams' T tiles of n rows
// each, joined in the mem tile) computes rows [start, start + len) of y.
// Blocks go round the columns (bb outer) so a column's objects are evenly
// strided; an object that would run past N is pulled back to end at N, so
// it recomputes rows another object owns with the same weights and writes
// them back unchanged: a row-major y (one row, M = 1) needs no padding, and
// its bytes are the plain vector the next op reads as it is.
int64_t rows_object_len(const LinearPlan& p, int c) { return int64_t{p.streams_in(c)} * p.T * p.n; }
bool objects_fit(const LinearPlan& p) {
  for (int c = 0; c < p.C; ++c)
    if (rows_object_len(p, c) > p.N) return false;
  return true;
}
int64_t rows_object_start(const LinearPlan& p, int c, int64_t bb) {
  const int64_t nominal = (bb * p.streams() + p.first_stream(c)) * p.T * p.n;
  return std::min(nominal, p.N - rows_object_len(p, c));
}

// A contiguous run of `len` elements as at most two BD dims (inner within the
// wrap, outer within the size); empty when none fits.
std::vector<npu::Dim> run_dims(int64_t len, const npu::DeviceSpec& spec) {
  for (int64_t w = std::min(len, spec.bd_max_wrap); w >= 1; --w)
    if (len % w == 0 && len / w <= spec.bd_max_size)
      return len == w ? std::vector<npu::Dim>{{w, 1}} : std::vector<npu::Dim>{{len / w, w}, {w, 1}};
  return {};
}

// Column c's y tasks: the blocks at their nominal rows as one strided task,
// the pulled-back ones (all at N - len) as one repeated task.
void add_gemv_rows_y(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec, int c) {
  const int64_t len = rows_object_len(p, c), stride = int64_t{p.streams()} * p.T * p.n;
  int64_t regular = 0;
  while (regular < p.NB && rows_object_start(p, c, regular) == regular * stride + p.first_stream(c) * p.T * p.n)
    ++regular;
  const std::string y = fmt::format("y{}", c), what = fmt::format("linear y rows (column {})", c);
  if (regular == 1) {
    l.sequence.push_back(b::from_device(y, "y_rows", span_pattern(rows_object_start(p, c, 0), len, p.N, 1, spec, what)));
  } else if (regular > 1) {
    npu::AccessPattern a;
    a.offset = rows_object_start(p, c, 0);
    a.dims = {{regular, stride}};
    for (const npu::Dim& d : run_dims(len, spec)) a.dims.push_back(d);
    l.sequence.push_back(b::from_device(y, "y_rows", a));
  }
  if (regular < p.NB)
    l.sequence.push_back(b::from_device(
        y, "y_rows", span_pattern(p.N - len, len, p.N, p.NB - regular, spec, what)));
}

void add_sequence(npu::Launch& l, const LinearPlan& p, const npu::DeviceSpec& spec, int64_t s0,
                  int64_t steps) {
  const int64_t x_step = p.m * p.Kp();  // elements of one M step
  const int64_t x_total = p.S * x_step;
  if (p.x_resident) {
    l.sequence.push_back(b::to_device(
        "x", kXHost, span_pattern(s0 * x_step, steps * x_step, x_total, 1, spec, "linear x")));
  } else {
    // Re-streamed once per output block of the step: NB repeats, in BD-sized runs.
    for (int64_t s = s0; s < s0 + steps; ++s)
      for (int64_t done = 0; done < p.NB; done += spec.bd_max_repeat) {
        int64_t rep = std::min(spec.bd_max_repeat, p.NB - done);
        l.sequence.push_back(b::to_device(
            "x", kXHost, span_pattern(s * x_step, x_step, x_total, rep, spec, "linear x")));
      }
  }
  for (int c = 0; c < p.C; ++c) {
    const int rows = active_rows(p, c);
    if (rows == 0) continue;
    for (int j = 0; j < p.streams_in(c); ++j) {
      npu::AccessPattern wp;
      wp.repeat = steps;  // the stream's weights once per M step
      l.sequence.push_back(b::to_device(fmt::format("w{}_{}", c, j), w_host(c, j), wp));
    }
    if (p.y_rows()) {
      add_gemv_rows_y(l, p, spec, c);
      continue;
    }
    const int64_t y_step = p.NB * rows * p.m * p.n;
    l.sequence.push_back(b::from_device(
        fmt::format("y{}", c), gemv_y_host(c),
        span_pattern(s0 * y_step, steps * y_step, p.S * y_step, 1, spec, "linear y")));
  }
}

// The first weight row of (stream s, block bb, tile t): the rows of column
// c's block bb are one contiguous object (rows_object_start), whether y is
// row-major or blocked, so both read one packed weight layout. When N is
// shorter than a column's object the streams own contiguous row ranges
// instead, blocked [bb][t][n] inside, padded past N (blocked y only).
int64_t first_row(const LinearPlan& p, int64_t s, int64_t bb, int64_t t) {
  if (!objects_fit(p)) return ((s * p.NB + bb) * p.T + t) * p.n;
  int c = 0;
  while (c + 1 < p.C && p.first_stream(c + 1) <= s) ++c;
  return rows_object_start(p, c, bb) + ((s - p.first_stream(c)) * p.T + t) * p.n;
}

}  // namespace

void check_gemv_rows(const LinearPlan& p, const npu::DeviceSpec& spec) {
  auto refuse = [&](const std::string& why) {
    throw_error<LimitError>("linear M={} K={} N={}: the gemv's row-major output ({}) {} (k={} n={} "
                            "streams={} T={})", p.M, p.K, p.N,
                            p.rowmajor ? kRowMajorTile : kRowMajorOutTile, why, p.k, p.n,
                            p.streams(), p.T);
  };
  if (p.M != 1) refuse("is for one row (decode); prompt rows use the gemm's");
  if (p.rowmajor && p.Kp() != p.K) refuse("needs K blocks that tile K exactly (x is read, not padded)");
  if (!objects_fit(p))
    refuse(fmt::format("needs N >= one column's block of {} rows", rows_object_len(p, p.C - 1)));
  for (int c = 0; c < p.C; ++c)
    if (run_dims(rows_object_len(p, c), spec).empty() || p.NB > spec.bd_max_size ||
        int64_t{p.streams()} * p.T * p.n > spec.bd_max_stride)
      refuse("has a block beyond the shim BD wrap / size / stride limits");
}

npu::Design make_gemv_design(const LinearPlan& p, const npu::DeviceSpec& spec) {
  npu::Design d;
  d.name = fmt::format("linear_M{}_K{}_N{}_gemv_{}x{}x{}_s{}{}{}", p.M, p.K, p.N, p.m, p.k, p.n,
                       p.streams(), p.x_resident ? "_xres" : "", p.y_rows() ? "_yrows" : "");
  d.host_buffers.push_back({kXHost, p.S * p.m * p.Kp() * 2, 2});
  if (p.y_rows()) d.host_buffers.push_back({"y_rows", p.M * p.N * 2, 2});
  for (int c = 0; c < p.C; ++c) {
    if (active_rows(p, c) == 0) continue;
    for (int j = 0; j < p.streams_in(c); ++j)
      d.host_buffers.push_back({w_host(c, j), p.NB * p.kb * p.T * p.n * p.k * 2, 2});
    if (!p.y_rows())
      d.host_buffers.push_back({gemv_y_host(c), p.S * p.NB * active_rows(p, c) * p.m * p.n * 2, 2});
  }
  add_linear_launches(d, p, [&](npu::Launch& l, const LinearLaunch& at) {
    add_fifos(l, p, spec);
    add_cores(l, p, spec, at.steps);
    add_sequence(l, p, spec, at.s0, at.steps);
  });
  return d;
}

void pack_gemv_w(const LinearPlan& p, const npu::Design& d, std::span<const float> w,
                 npu::HostMemory& host) {
  for (int c = 0; c < p.C; ++c) {
    if (active_rows(p, c) == 0) continue;
    for (int j = 0; j < p.streams_in(c); ++j) {
      bf16* dst = host_bf16(d, w_host(c, j), host);
      const int64_t s = p.first_stream(c) + j;
      for (int64_t bb = 0; bb < p.NB; ++bb)
        for (int64_t t = 0; t < p.T; ++t)
          for (int64_t i = 0; i < p.n; ++i) {
            const int64_t row = first_row(p, s, bb, t) + i;
            if (row >= p.N) continue;
            for (int64_t kk = 0; kk < p.kb && kk * p.k < p.K; ++kk) {
              const int64_t len = std::min(p.k, p.K - kk * p.k);
              bf16* out = dst + (((bb * p.kb + kk) * p.T + t) * p.n + i) * p.k;
              f32_to_bf16(w.subspan(static_cast<size_t>(row * p.K + kk * p.k), static_cast<size_t>(len)),
                          std::span<bf16>(out, static_cast<size_t>(len)));
            }
          }
    }
  }
}

std::vector<float> unpack_gemv_y(const LinearPlan& p, const npu::Design& d,
                                 const npu::HostMemory& host) {
  std::vector<float> y(static_cast<size_t>(p.M * p.N));
  if (p.y_rows()) {
    const bf16* src = host_bf16(d, "y_rows", host);
    for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_f32(src[i]);
    return y;
  }
  for (int c = 0; c < p.C; ++c) {
    const int rows = active_rows(p, c);
    if (rows == 0) continue;
    const bf16* src = host_bf16(d, gemv_y_host(c), host);
    for (int64_t s = 0; s < p.S; ++s)
      for (int64_t bb = 0; bb < p.NB; ++bb)
        for (int r = 0; r < rows; ++r) {
          const int64_t col0 = first_row(p, p.first_stream(c) + r / p.T, bb, r % p.T);
          if (col0 >= p.N) continue;
          const int64_t cols = std::min(p.n, p.N - col0);
          const bf16* blk = src + ((s * p.NB + bb) * rows + r) * p.m * p.n;
          for (int64_t i = 0; i < p.m && s * p.m + i < p.M; ++i)
            for (int64_t e = 0; e < cols; ++e)
              y[(s * p.m + i) * p.N + col0 + e] = bf16_to_f32(blk[i * p.n + e]);
        }
  }
  return y;
}

}  // namespace tessera::kernels
