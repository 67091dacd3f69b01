// The `argmax` builder: ids[M] = first index of the max of each logits row
// [M, V] (docs/ops.md), with the kernel library's mergeable top-k state (k=1).
//
// Dataflow: the vocab is cut into one contiguous range per compute tile
// (ceil(V / tiles) logits; trailing tiles may get none and sit out). Column c
// streams its tiles' logits from its shim into its mem tile, which splits each
// object over the column's R tiles. Every tile folds its range into a state
// object with topk_block (the exact valid count is a call param, so the zero
// padding of a short last range is never read), then merges the state handed
// on by the previous tile of a chain that runs up each column, column after
// column, and hands the merged state on; the last tile sends it to its shim.
// Ties resolve to the smaller index in topk_merge, so the chain order cannot
// change the result.
#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/grid.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/kernels/topk.h"
#include "tessera/npu/builder.h"

namespace tessera::kernels {
namespace {

using npu::CoreOp;
using npu::TileCoord;
using grid::ceil_div;
using grid::core;
namespace b = npu::build;

constexpr int64_t kStateBytes = sizeof(TopkEntry);  // k = 1

struct ArgmaxPlan {
  int64_t M = 0, V = 0;
  int C = 0, R = 0;
  int64_t vt = 0;    // logits per tile (the last active tile may hold fewer)
  int64_t vb = 0;    // logits per object
  int64_t nblk = 0;  // objects per tile and row: vt <= nblk * vb
  int active = 0;    // tiles with a non-empty range, in chain order
};

ArgmaxPlan plan(int64_t M, int64_t V, const npu::DeviceSpec& spec, const TileOptions& t) {
  if (M < 1 || V < 1) throw_error<LimitError>("argmax M={} V={}: every dim must be >= 1", M, V);
  ArgmaxPlan p;
  p.M = M;
  p.V = V;
  p.C = spec.columns;
  p.R = spec.compute_rows;
  const int64_t tiles = int64_t{p.C} * p.R;
  p.vt = ceil_div(V, tiles);
  p.active = static_cast<int>(ceil_div(V, p.vt));
  // Two logits objects and two states per tile in L1; R objects twice over in
  // the mem tile's split pool.
  int64_t l1_cap = (spec.compute.memory_bytes - 4 * kStateBytes - 256) / (2 * 2);
  int64_t l2_cap = (spec.mem.memory_bytes - 1024) / (2 * 2 * p.R);
  int64_t cap = std::min(l1_cap, l2_cap) / 2 * 2;
  auto it = t.find("block");
  p.vb = it != t.end() ? it->second : std::min(cap, round_up(p.vt, 2));
  if (p.vb < 2 || p.vb > cap)
    throw_error<LimitError>("argmax M={} V={}: logits object of {} must lie in [2, {}] (L1 {} "
                            "bytes, L2 {} bytes on {})", M, V, p.vb, cap,
                            spec.compute.memory_bytes, spec.mem.memory_bytes, spec.name);
  p.nblk = ceil_div(p.vt, p.vb);
  return p;
}

// Chain position i -> tile: up column 0, then up column 1, ...
int chain_row(const ArgmaxPlan& p, int i) { return i % p.R; }
TileCoord chain_tile(const ArgmaxPlan& p, const npu::DeviceSpec& s, int i) {
  return core(s, i / p.R, chain_row(p, i));
}
std::string logits_host(int c) { return fmt::format("logits_c{}", c); }
std::string state_fifo(int i) { return fmt::format("state{}", i); }

std::vector<CoreOp> tile_program(const ArgmaxPlan& p, int i) {
  const int c = i / p.R;
  const std::string in = fmt::format("logits{}_{}", c, chain_row(p, i));
  const std::string out = i + 1 == p.active ? "ids" : state_fifo(i);
  const int64_t v0 = i * p.vt, v1 = std::min(p.V, v0 + p.vt);
  std::vector<CoreOp> row = {b::acquire_out(out), b::call("topk_init", {out}, {{"k", int64_t{1}}})};
  for (int64_t blk = 0; blk < p.nblk; ++blk) {
    int64_t start = v0 + blk * p.vb, n = std::min(p.vb, v1 - start);
    row.push_back(b::acquire_in(in));
    if (n > 0)
      row.push_back(b::call("topk_block", {in, out},
                            {{"n", n}, {"k", int64_t{1}}, {"index0", start}}));
    row.push_back(b::release_in(in));
  }
  if (i > 0) {
    row.push_back(b::acquire_in(state_fifo(i - 1)));
    row.push_back(b::call("topk_merge", {out, state_fifo(i - 1)}, {{"k", int64_t{1}}}));
    row.push_back(b::release_in(state_fifo(i - 1)));
  }
  row.push_back(b::release_out(out));
  return {b::loop(p.M, std::move(row))};
}

npu::Design make_design(const ArgmaxPlan& p, const npu::DeviceSpec& spec) {
  npu::Design d;
  d.name = fmt::format("argmax_M{}_V{}", p.M, p.V);
  npu::Launch l;
  l.name = "argmax";
  const int columns = static_cast<int>(ceil_div(p.active, p.R));
  const int64_t obj = p.vb * 2;
  for (int c = 0; c < columns; ++c) {
    int rows = std::min(p.R, p.active - c * p.R);
    std::string f = fmt::format("logits{}", c);
    d.host_buffers.push_back({logits_host(c), p.M * p.nblk * rows * obj, 2});
    l.fifos.push_back(b::fifo(f, {c, 0}, {{c, spec.shim_rows}}, rows * obj, 2));
    npu::Link split{{c, spec.shim_rows}, {f}, {}, {}};
    for (int r = 0; r < rows; ++r) {
      std::string fr = fmt::format("logits{}_{}", c, r);
      l.fifos.push_back(b::fifo(fr, {c, spec.shim_rows}, {core(spec, c, r)}, obj, 2));
      split.outputs.push_back(fr);
      split.offsets_bytes.push_back(r * obj);
    }
    l.links.push_back(std::move(split));
    l.sequence.push_back(b::to_device(f, logits_host(c)));
  }
  for (int i = 0; i + 1 < p.active; ++i)
    l.fifos.push_back(b::fifo(state_fifo(i), chain_tile(p, spec, i), {chain_tile(p, spec, i + 1)},
                              kStateBytes, 2, 4));
  TileCoord last = chain_tile(p, spec, p.active - 1);
  d.host_buffers.push_back({"ids", p.M * kStateBytes, 4});
  l.fifos.push_back(b::fifo("ids", last, {{last.col, 0}}, kStateBytes, 2, 4));
  l.sequence.push_back(b::from_device("ids", "ids"));
  for (int i = 0; i < p.active; ++i) l.cores.push_back({chain_tile(p, spec, i), tile_program(p, i)});
  d.launches.push_back(std::move(l));
  return d;
}

// Host layout of column c: [row][blk][r][vb], in the order the mem tile's
// split hands objects to the column's tiles.
void pack_logits(const ArgmaxPlan& p, const npu::Design& d, std::span<const float> v,
                 npu::HostMemory& host) {
  for (int i = 0; i < p.active; ++i) {
    int c = i / p.R, r = chain_row(p, i);
    int rows = std::min(p.R, p.active - c * p.R);
    bf16* dst = host_bf16(d, logits_host(c), host);
    int64_t v0 = i * p.vt, v1 = std::min(p.V, v0 + p.vt);
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t blk = 0; blk < p.nblk; ++blk) {
        int64_t start = v0 + blk * p.vb, n = std::min(p.vb, v1 - start);
        bf16* o = dst + ((m * p.nblk + blk) * rows + r) * p.vb;
        for (int64_t e = 0; e < n; ++e) o[e] = f32_to_bf16(v[m * p.V + start + e]);
      }
  }
}

class ArgmaxBuilder : public OpBuilder {
 public:
  std::string op() const override { return "argmax"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    check_tile_keys(shape.key(), tiles, {"block"});
    ArgmaxPlan p = plan(shape.dim("M"), shape.dim("V"), spec, tiles);
    BuiltOp out;
    out.shape = shape;
    out.design = make_design(p, spec);
    validate_design(out.design, spec);
    out.inputs = {{"logits", {p.M, p.V}}};
    out.outputs = {{"ids", {p.M}}};
    out.tiles = {{"block", p.vb}};
    auto d = std::make_shared<npu::Design>(out.design);
    out.pack = [p, d](size_t, std::span<const float> v, npu::HostMemory& host) {
      pack_logits(p, *d, v, host);
    };
    out.unpack = [p, d](size_t, const npu::HostMemory& host) {
      auto bytes = host_bytes(*d, "ids", host);
      std::vector<float> ids(static_cast<size_t>(p.M));
      for (int64_t m = 0; m < p.M; ++m) {
        TopkEntry e;
        std::memcpy(&e, bytes.data() + m * kStateBytes, sizeof e);
        ids[m] = static_cast<float>(e.index);
      }
      return ids;
    };
    return out;
  }
};

}  // namespace

void register_argmax_builder() { register_op_builder(std::make_unique<ArgmaxBuilder>()); }

}  // namespace tessera::kernels
