// Tile choice for the linear builder: which dataflow, which block sizes, how
// many launches. Every number that bounds a choice comes from the DeviceSpec.
#include <algorithm>
#include <optional>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/grid.h"
#include "tessera/kernels/builders/linear.h"
#include "tessera/kernels/kernel_common.h"

namespace tessera::kernels {
namespace {

// Decode and short prompts: one M block, weights read once.
constexpr int64_t kGemvMaxM = 32;
// Largest GEMM block edge: 64^3 keeps x, w (both double-buffered), the fp32
// accumulator and two y objects inside a 64 KiB L1 (the mlir-aie whole-array
// default).
constexpr int64_t kGemmEdge = 64;
using grid::ceil_div;
using grid::kL1Align;
using grid::opt;

// K blocks are multiples of the 8-wide bf16 MAC granule; long K in multiples
// of 64 so that every shim run factorises into BD dims.
int64_t k_quantum(int64_t K) { return K >= 64 ? 64 : 8; }
// With one y object the K block grows past 64 in steps of 16 bf16 (32-byte
// rows, the L1 allocator's alignment), e.g. 80 at 64 x 64.
constexpr int64_t kYOneQuantum = 16;

bool needs_acc(const LinearPlan& p) { return !(p.m == 1 && p.kb == 1); }

[[noreturn]] void no_fit(const LinearPlan& p, const npu::DeviceSpec& spec, const char* why) {
  throw_error<LimitError>("linear M={} K={} N={}: {} (L1 {} bytes on {}, block m={} k={} n={})",
                          p.M, p.K, p.N, why, spec.compute.memory_bytes, spec.name, p.m, p.k, p.n);
}

// Largest n (multiple of `gran`, or 0) whose per-tile footprint fits.
int64_t max_n(LinearPlan p, int64_t budget, int64_t gran) {
  p.n = 0;
  int64_t fixed = p.l1_bytes();
  p.n = gran;
  int64_t per = p.l1_bytes() - fixed;
  int64_t n = std::max<int64_t>(0, (budget - fixed) / per * gran);
  // The estimate ignores 32-byte rounding of each pool; step down to the truth.
  for (p.n = n; p.n > 0 && p.l1_bytes() > budget; p.n -= gran) {
  }
  return p.n;
}

// The longest K block (a multiple of q, 0 if none) that fits L1 with x
// double-buffered.
int64_t longest_k(LinearPlan c, int64_t q, int64_t budget) {
  c.kb = 2;
  int64_t kmax = 0;
  for (c.k = q; c.k <= round_up(c.K, q) && c.l1_bytes() <= budget; c.k += q) kmax = c.k;
  return kmax;
}

// Weight streams per column and tiles per stream: every shim MM2S channel
// (one on shim 0 is x's) feeds T tiles through the mem tile, whose input
// channels also take the column's R y objects.
void plan_streams(LinearPlan& p, const TileOptions& t, const npu::DeviceSpec& spec) {
  const int most = std::min({spec.shim.dma_out, p.R, spec.mem.dma_in - p.R});
  p.streams_per_column = static_cast<int>(opt(t, "streams", std::max(most, 1)));
  while (!t.count("streams") && p.streams_per_column > 1 && p.R % p.streams_per_column != 0)
    --p.streams_per_column;
  if (p.streams_per_column < 1 || p.streams_per_column > std::max(most, 1) ||
      p.R % p.streams_per_column != 0)
    no_fit(p, spec, "weight streams per column must divide the rows and fit the shim / mem "
                    "tile channels");
  p.T = p.R / p.streams_per_column;
  p.streams_col0 = std::min(p.streams_per_column, spec.shim.dma_out - 1);
  if (p.streams() < 1) no_fit(p, spec, "no shim channel is left for the weights");
}

// Objects a tile should see at least: the first object's trip (fill) is
// paid once per launch, so objects must be small next to what a stream
// carries; a call costs only tens of cycles, so small objects are cheap.
constexpr int64_t kTargetObjects = 64;

// One pass of the gemv's K-split search (plan_gemv). `exact_up_to` > 0
// takes only splits of at most that many blocks that tile K exactly, and
// only a full fit (no fallback).
std::optional<LinearPlan> search_k_split(const LinearPlan& p, const TileOptions& t, int64_t budget,
                                         int64_t exact_up_to) {
  // The matrix unit's n granule; for m = 1 a y object must still be whole
  // 4-byte DMA words.
  const int64_t gran = p.m > 1 ? 4 : 2;
  const int64_t rows_per_tile = ceil_div(p.N, int64_t{p.streams()} * p.T);
  const int64_t q = k_quantum(p.K);
  // The fewest K blocks whose weight block is wide enough, x resident if it
  // can be: a re-streamed x (m rows per block, on one port) must not outweigh
  // the weights each stream carries next to it (T n rows), so it needs n >=
  // 2m / T; failing that anywhere, the first K split that fits at all.
  std::optional<LinearPlan> fallback;
  for (int64_t kb = 1; kb <= (exact_up_to > 0 ? exact_up_to : 256); ++kb) {
    LinearPlan c = p;
    c.k = opt(t, "k", round_up(ceil_div(p.K, kb), q));
    c.kb = ceil_div(p.K, c.k);
    if (c.kb != kb && !t.count("k")) continue;
    if (exact_up_to > 0 && c.Kp() != p.K) continue;
    for (int res : {1, 0}) {
      if (t.count("x_resident") && opt(t, "x_resident", 1) != res) continue;
      c.x_resident = res != 0;
      if (!c.x_resident && c.kb == 1) continue;  // one K block is resident by nature
      const int64_t n_max = max_n(c, budget, gran);
      if (n_max < gran) continue;
      const int64_t n_min = c.x_resident ? gran : round_up(ceil_div(2 * c.m, c.T), gran);
      int64_t n = round_up(ceil_div(rows_per_tile, ceil_div(kTargetObjects, c.kb)), gran);
      c.n = opt(t, "n", std::clamp(std::max(n, n_min), gran, n_max));
      if (!fallback && exact_up_to == 0) fallback = c;
      if (n_max >= n_min || t.count("n")) return c;
    }
    if (t.count("k")) break;
  }
  return fallback;
}

void plan_gemv(LinearPlan& p, const TileOptions& t, int64_t budget, const npu::DeviceSpec& spec) {
  plan_streams(p, t, spec);
  p.m = opt(t, "m", std::min(p.M, kGemvMaxM));
  p.S = ceil_div(p.M, p.m);
  std::optional<LinearPlan> c = search_k_split(p, t, budget, 0);
  if (!c) no_fit(p, spec, "no K split fits");
  // One row (decode) whose fewest fitting K blocks pad K: K blocks that tile
  // it exactly, if at most twice as many fit. x is then the plain row a
  // row-wise producer writes (silu_mul into down at K = 11008: 3 blocks of
  // 3712 pad it, 4 of 2752 do not), so the two fuse without a re-layout; the
  // weights still cross DDR once, in more, shorter dot products.
  if (p.M == 1 && !t.count("k") && c->Kp() != p.K)
    if (auto e = search_k_split(p, t, budget, 2 * c->kb)) c = e;
  p = *c;
  p.NB = ceil_div(p.N, int64_t{p.streams()} * p.T * p.n);
}

// The weight panel (all K of an N block) in the mem tile next to the y
// join: its bytes, and a BD per slot (panel objects, the broadcast's 2, y's
// 2R + 2).
bool panel_fits(const LinearPlan& p, const npu::DeviceSpec& spec) {
  const int64_t slots = std::max<int64_t>(p.kb / p.wk, 2);
  return slots * p.wk * p.k * p.n * 2 + int64_t{p.R} * p.m * p.n * 2 * 2 <= spec.mem.memory_bytes &&
         slots + 2 + 2 * int64_t{p.R} + 2 <= spec.mem.buffer_descriptors;
}

// A partial panel's mem tile: resident objects and two tail slots in the w
// link pool, y's join pool of two R-block objects. BDs: the w pool's slots,
// the broadcast's 2, y's R * y_depth inputs and its 2 to the shim.
int64_t partial_panel_bytes(const LinearPlan& p) {
  return (p.panel_k + 2) * p.n * p.k * 2 + int64_t{p.R} * p.m * p.n * 2 * 2;
}
int64_t partial_panel_bds(const LinearPlan& p) { return p.panel_k + 2 + 2 + int64_t{p.R} * p.y_depth + 2; }

// The most K blocks a partial panel of `p`'s blocks keeps resident, 0 when
// the whole panel fits (nothing to gain) or not one block does. More resident
// blocks only ever save DDR bytes: the cores' traffic is the same.
int64_t most_resident_k(LinearPlan p, const npu::DeviceSpec& spec) {
  if (!p.gemm || p.wk != 1 || p.kb < 2 || panel_fits(p, spec)) return 0;
  p.panel_k = 0;
  const int64_t by_bytes = (spec.mem.memory_bytes - partial_panel_bytes(p)) / (p.n * p.k * 2);
  const int64_t by_bds = spec.mem.buffer_descriptors - partial_panel_bds(p);
  return std::max<int64_t>(0, std::min({by_bytes, by_bds, p.kb - 1}));
}

// Shim BDs of a panel launch with blocked y on an x shim: the x passes (one
// task per 255 N blocks), W (once; a partial panel: two tasks per N block)
// and the y task.
int64_t panel_shim_bds(const LinearPlan& p, const npu::DeviceSpec& spec) {
  return ceil_div(p.NB, spec.bd_max_repeat) + (p.partial_panel() ? 2 * p.NB : 1) + 1;
}
// A row-major y splits the N blocks over launches instead.
bool partial_panel_shim_fits(const LinearPlan& p, const npu::DeviceSpec& spec) {
  return p.rowmajor_y || panel_shim_bds(p, spec) <= spec.shim.buffer_descriptors;
}

// The K block: the longest multiple of q that fits L1, spread evenly over K.
void choose_k(LinearPlan& p, int64_t q, int64_t budget, const npu::DeviceSpec& spec) {
  const int64_t kmax = longest_k(p, q, budget);
  if (kmax < q) no_fit(p, spec, "no K block of the 8-wide granule fits");
  p.kb = ceil_div(p.K, kmax);
  p.k = round_up(ceil_div(p.K, p.kb), q);
}

// A partial panel (TileOptions "panel_k"): only with single K block objects.
// Where the whole panel fits it is legal but never faster (the candidates
// offer it only where the whole panel does not fit).
void finish_partial_panel(LinearPlan& p, const TileOptions& t, const npu::DeviceSpec& spec) {
  p.panel_k = t.at("panel_k");
  if (p.panel_k < 1 || p.panel_k >= p.kb)
    no_fit(p, spec, "panel_k (resident K blocks of a partial weight panel) must be in 1 .. kb - 1");
  if (opt(t, "panel", 1) == 0 || opt(t, "wk", 1) != 1)
    no_fit(p, spec, "panel_k needs the weight panel with one K block per object (wk = 1)");
  p.panel = true;
  p.NB = ceil_div(p.N, int64_t{p.C} * p.n);
  if (partial_panel_bytes(p) > spec.mem.memory_bytes || partial_panel_bds(p) > spec.mem.buffer_descriptors)
    throw_error<LimitError>("linear M={} K={} N={}: a partial weight panel of {} resident K blocks (m={} k={} "
                            "n={}) needs {} bytes and {} BDs of the mem tile, limits {} and {} on {}",
                            p.M, p.K, p.N, p.panel_k, p.m, p.k, p.n, partial_panel_bytes(p),
                            partial_panel_bds(p), spec.mem.memory_bytes, spec.mem.buffer_descriptors,
                            spec.name);
}

// With the K block and the y depth chosen: the weight panel, wk, N blocks.
void finish_gemm(LinearPlan& p, const TileOptions& t, int64_t budget, const npu::DeviceSpec& spec) {
  p.S = ceil_div(p.M, int64_t{p.R} * p.m);
  if (t.count("panel_k")) return finish_partial_panel(p, t, spec);
  p.wk = opt(t, "wk", 1);
  if (p.wk < 1 || (p.wk > 1 && t.count("panel") && t.at("panel") == 0))
    no_fit(p, spec, "wk (K blocks per weight object) is >= 1 and needs the weight panel");
  p.kb = round_up(p.kb, p.wk);
  bool fits = panel_fits(p, spec);
  if (!fits && !t.count("wk") && opt(t, "panel", 1) != 0 && p.kb >= 4) {
    LinearPlan c = p;  // two K blocks per object: half the panel's BDs
    c.wk = 2;
    c.kb = round_up(p.kb, 2);
    while (!t.count("n") && c.n > 16 && c.l1_bytes() > budget) c.n -= 16;
    if (c.l1_bytes() <= budget && panel_fits(c, spec)) {
      p = c;
      fits = true;
    }
  }
  p.NB = ceil_div(p.N, int64_t{p.C} * p.n);
  p.x_resident = p.kb == 1;
  p.panel = opt(t, "panel", fits ? 1 : 0) != 0;
  if (p.panel && !fits)
    no_fit(p, spec, "the K panel of a weight block overflows the mem tile's memory or BDs");
  // By default a panel too long for the mem tile keeps what fits of it
  // resident: the same core traffic as streaming, fewer DDR bytes.
  if (!fits && !t.count("panel") && !t.count("wk")) {
    LinearPlan c = p;
    c.panel = true;
    c.panel_k = most_resident_k(p, spec);
    if (c.panel_k > 0 && partial_panel_shim_fits(c, spec)) p = c;
  }
}

void plan_gemm(LinearPlan& p, const TileOptions& t, int64_t budget, const npu::DeviceSpec& spec) {
  p.m = opt(t, "m", std::min(kGemmEdge, round_up(ceil_div(p.M, p.R), 4)));
  // A row-major y re-reads whole rows instead of padding: one step of R * m
  // rows must fit M (m does not change the W layout).
  if ((p.rowmajor || p.rowmajor_y) && !t.count("m") && p.R * p.m > p.M)
    p.m = std::max<int64_t>(4, p.M / p.R / 4 * 4);
  p.n = opt(t, "n", std::min(kGemmEdge, round_up(ceil_div(p.N, p.C), 4)));
  p.y_depth = static_cast<int>(opt(t, "y_depth", 2));
  if (p.y_depth < 1 || p.y_depth > 2) no_fit(p, spec, "y_depth (y objects per tile) is 1 or 2");
  const int64_t q = k_quantum(p.K), q1 = std::min(q, kYOneQuantum);
  if (t.count("k")) {
    p.k = t.at("k");
    p.kb = ceil_div(p.K, p.k);
    // A given k (the layout policy's) takes one y object when two do not fit.
    LinearPlan c = p;
    c.x_resident = c.kb == 1;
    if (!t.count("y_depth") && c.l1_bytes() > budget) p.y_depth = 1;
    return finish_gemm(p, t, budget, spec);
  }
  LinearPlan one = p;
  choose_k(p, p.y_depth == 1 ? q1 : q, budget, spec);
  finish_gemm(p, t, budget, spec);
  if (t.count("y_depth") || p.rowmajor) return;
  // One y object when it buys fewer K blocks without narrowing the weight
  // block (a long-K panel of two K blocks per object shrinks n to fit L1)
  // and hides its drain (LinearPlan::y_depth).
  one.y_depth = 1;
  try {
    choose_k(one, q1, budget, spec);
    finish_gemm(one, t, budget, spec);
  } catch (const LimitError&) {
    return;  // a forced panel that only two y objects' K block fits
  }
  if (one.kb < p.kb && one.n == p.n && one.Kp() >= std::min(p.m, p.n)) p = one;
}

}  // namespace

int LinearPlan::streams_in(int c) const { return c == 0 ? streams_col0 : streams_per_column; }
int LinearPlan::streams() const { return streams_col0 + (C - 1) * streams_per_column; }
int LinearPlan::first_stream(int c) const {
  return c == 0 ? 0 : streams_col0 + (c - 1) * streams_per_column;
}

namespace {
using grid::pool;
int64_t x_pool(const LinearPlan& p) { return pool(p.x_resident ? p.m * p.kb * p.k * 2 : 2 * p.m * p.k * 2); }
int64_t w_pool(const LinearPlan& p) { return pool(2 * p.n * p.wk * p.k * 2); }
}  // namespace

int64_t LinearPlan::l1_bytes() const {
  int64_t acc = needs_acc(*this) ? pool(m * n * 4) : 0;
  int64_t y = pool((gemm ? y_depth : 2) * m * n * 2);
  return x_pool(*this) + w_pool(*this) + acc + y;
}

int64_t LinearPlan::acc_address() const {
  return gemm && y_depth == 1 ? x_pool(*this) + w_pool(*this) : -1;
}

LinearPlan plan_linear(int64_t M, int64_t K, int64_t N, const npu::DeviceSpec& spec,
                       const TileOptions& tiles) {
  LinearPlan p;
  p.M = M;
  p.K = K;
  p.N = N;
  if (M < 1 || K < 1 || N < 1)
    throw_error<LimitError>("linear M={} K={} N={}: every dim must be >= 1", M, K, N);
  p.C = static_cast<int>(opt(tiles, "columns", spec.columns));
  p.R = static_cast<int>(opt(tiles, "rows", spec.compute_rows));
  if (p.C < 1 || p.C > spec.columns || p.R < 1 || p.R > spec.compute_rows)
    throw_error<LimitError>("linear M={} K={} N={}: {} columns x {} rows outside the {}x{} array "
                            "of {}", M, K, N, p.C, p.R, spec.columns, spec.compute_rows, spec.name);
  p.gemm = opt(tiles, "gemm", M > kGemvMaxM ? 1 : 0) != 0;
  // Row group r of the gemm dataflow is fed by shim r.
  if (p.gemm && p.R > p.C)
    throw_error<LimitError>("linear M={} K={} N={}: the gemm dataflow feeds compute row r from "
                            "shim r and needs rows {} <= columns {}", M, K, N, p.R, p.C);
  const int64_t budget = spec.compute.memory_bytes;
  p.rowmajor = opt(tiles, kRowMajorTile, 0) != 0;
  p.rowmajor_y = !p.rowmajor && opt(tiles, kRowMajorOutTile, 0) != 0;
  TileOptions t = tiles;
  if (p.rowmajor) t.try_emplace("panel", 0);
  if (p.gemm)
    plan_gemm(p, t, budget, spec);
  else
    plan_gemv(p, tiles, budget, spec);
  if (p.m < 1 || p.k < 1 || p.n < 1 || p.l1_bytes() > budget)
    no_fit(p, spec, "the blocks (x, w double-buffered, fp32 acc, y) overflow L1");
  // Shim BDs on an x shim: its W tasks and a y task per launch, plus x tasks
  // (one for a resident x, else one per M step and 255 repeats of it).
  const int64_t w_tasks = p.gemm ? 1 : p.streams_in(0);
  if (!p.gemm && p.y_rows()) {  // one row: one M step, one launch
    check_gemv_rows(p, spec);
    p.s_per_launch = 1;
    p.nb_per_launch = p.NB;
    return p;
  }
  if (p.rowmajor) {  // x and y tasks per M step on every x shim, W once
    check_linear_rowmajor(p, spec);
    p.s_per_launch = std::min({p.S, spec.bd_max_repeat,
                               (spec.shim.buffer_descriptors - w_tasks) /
                                   rowmajor_tasks_per_step(p, spec)});
    if (p.s_per_launch < 1) no_fit(p, spec, "one row-major M step needs more shim BDs than the spec has");
    return p;
  }
  p.nb_per_launch = p.NB;
  if (p.rowmajor_y) check_linear_rowmajor(p, spec);
  if (p.panel && p.rowmajor_y) {
    // Every launch takes all M steps it can (W then crosses DDR once per op)
    // and as many N blocks as an x shim's BDs hold: W, one x task per 255 N
    // blocks, one y task per N block.
    p.s_per_launch = std::min(p.S, spec.bd_max_repeat);
    while (p.s_per_launch > 1 &&
           rowmajor_row_split(p, p.s_per_launch, spec) == 0)
      --p.s_per_launch;
    if (rowmajor_row_split(p, p.s_per_launch, spec) == 0)
      no_fit(p, spec, "one step's row-major y rows exceed the shim BD size / stride limits");
    // (a partial panel: no single W task, two per N block instead)
    const int64_t bds = spec.shim.buffer_descriptors - (p.partial_panel() ? 0 : 1);
    const int64_t per_nb = p.partial_panel() ? 3 : 1;
    for (p.nb_per_launch = std::min(p.NB, bds - 1);
         p.nb_per_launch > 0 &&
         ceil_div(p.nb_per_launch, spec.bd_max_repeat) + per_nb * p.nb_per_launch > bds;)
      --p.nb_per_launch;
    if (p.nb_per_launch < 1) no_fit(p, spec, "one N block's x and y tasks need more shim BDs than the spec has");
    return p;
  }
  if (p.panel) {
    if (panel_shim_bds(p, spec) > spec.shim.buffer_descriptors)
      no_fit(p, spec, "one launch's x passes and W tasks need more shim BDs than the spec has");
    p.s_per_launch = std::min(p.S, spec.bd_max_repeat);
    return p;
  }
  const int64_t x_per_s = p.x_resident ? 0 : ceil_div(p.NB, spec.bd_max_repeat);
  const int64_t free_bds = spec.shim.buffer_descriptors - w_tasks - 1 - (p.x_resident ? 1 : 0);
  p.s_per_launch = x_per_s == 0 ? p.S : free_bds / x_per_s;
  if (p.rowmajor_y)  // and a y task per step (each writes its own rows)
    p.s_per_launch = (spec.shim.buffer_descriptors - w_tasks) / (std::max<int64_t>(x_per_s, 1) + 1);
  p.s_per_launch = std::min({p.s_per_launch, p.S, spec.bd_max_repeat});
  if (p.s_per_launch < 1) no_fit(p, spec, "one M step needs more shim BDs than the spec has");
  return p;
}

namespace {

// The partial panel of the streaming option `t` (panel = 0): as many
// resident K blocks as fit, 0 when the whole panel fits, none does or `t`
// does not build.
int64_t resident_k_of(int64_t M, int64_t K, int64_t N, const npu::DeviceSpec& spec, const TileOptions& t) {
  try {
    return most_resident_k(plan_linear(M, K, N, spec, t), spec);
  } catch (const LimitError&) {
    return 0;
  }
}

}  // namespace

std::vector<TileOptions> linear_tile_candidates(int64_t M, int64_t K, int64_t N,
                                               const npu::DeviceSpec& spec) {
  std::vector<TileOptions> out;
  const int64_t q = k_quantum(K);
  auto k_for = [&](int64_t kb) { return round_up(ceil_div(K, kb), q); };
  if (M <= kGemvMaxM) {
    const int64_t gran = M > 1 ? 4 : 2;
    for (int s = 1; s <= std::min(spec.shim.dma_out, spec.compute_rows); ++s)
      for (int res : {1, 0})
        for (int64_t kb : {1, 2, 3, 4, 6, 8, 12, 16}) {
          if ((res == 0 && kb == 1) || (kb > 1 && k_for(kb) == k_for(kb - 1))) continue;
          for (int64_t n : {2, 4, 6, 8, 12, 16, 24, 32, 48, 64})
            if (n % gran == 0 && n <= round_up(N, gran))
              out.push_back({{"gemm", 0}, {"streams", s}, {"x_resident", res}, {"k", k_for(kb)},
                             {"n", n}});
        }
    return out;
  }
  for (int panel : {1, 0})
    for (int64_t m : {32, 48, 64})
      for (int64_t n : {32, 48, 64}) {
        for (int64_t kb : {1, 2, 4, 8, 16, 32, 64, 128})
          if (kb == 1 || k_for(kb) != k_for(kb / 2))
            out.push_back({{"gemm", 1}, {"panel", panel}, {"m", m}, {"n", n}, {"k", k_for(kb)},
                           {"y_depth", 2}});
        // One y object: the K blocks past 64 that only it lets fit.
        for (int64_t k : {80, 96, 112, 128, 160})
          if (k < round_up(K, kYOneQuantum))
            out.push_back({{"gemm", 1}, {"panel", panel}, {"m", m}, {"n", n}, {"k", k},
                           {"y_depth", 1}});
      }
  // A partial panel where the whole one does not fit: as many resident K
  // blocks as the mem tile holds (more only ever saves DDR bytes).
  const size_t streaming = out.size();
  for (size_t i = 0; i < streaming; ++i) {
    if (out[i].at("panel") != 0) continue;
    if (const int64_t pk = resident_k_of(M, K, N, spec, out[i]); pk > 0) {
      TileOptions c = out[i];
      c["panel"] = 1;
      c["panel_k"] = pk;
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace tessera::kernels
