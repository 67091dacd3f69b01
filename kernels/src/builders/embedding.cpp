// The `embedding` builder: x[M, H] = table[ids[M], :] (docs/ops.md).
//
// The rows to read depend on the ids, which a static design cannot know. As
// an XRT runtime sequence takes buffer offsets as runtime arguments, the
// design has one shim DMA task per token whose table offset is a patch point:
// BuiltOp::patch reads the packed ids and sets offset = id * H (the stored
// design has 0 there; same bytes moved, same timing). Each task moves one
// table row shim -> mem tile -> shim into the token's row of x: the cost is
// exactly M*H*2 bytes read and written, against V*H*2 for streaming the whole
// table past resident ids through the embedding_gather kernel (the 256 MiB
// table of llama-3.2-1b would take ~9 ms per token at 60 GB/s; the row copies
// take microseconds). Tokens are dealt to the columns in runs of
// (shim BDs - 1), one BD per row task plus one for the run's output; one
// launch takes every token: after each round of C runs the sequence waits
// (DmaTask::after_wait) so that the next round reuses the BDs, at the cost
// of one pipeline drain and refill per wait.
// A copy: values are bit-exact bf16 roundings of the table.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "tessera/core/mutants.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/npu/builder.h"

namespace tessera::kernels {
namespace {

namespace b = npu::build;

struct EmbeddingPlan {
  int64_t M = 0, V = 0, H = 0;
  int C = 0;
  int64_t run = 0;  // tokens per column and launch
  // Per launch, per sequence task: the token whose row it reads, or -1.
  std::vector<std::vector<int64_t>> token_of_task;
};

npu::Design make_design(EmbeddingPlan& p, const npu::DeviceSpec& spec) {
  npu::Design d;
  d.name = fmt::format("embedding_M{}_V{}_H{}", p.M, p.V, p.H);
  d.host_buffers = {{"ids", p.M * 4, 4}, {"table", p.V * p.H * 2, 2}, {"x", p.M * p.H * 2, 2}};
  const int64_t row_bytes = p.H * 2;
  npu::Launch l;
  l.name = "embedding";
  const int64_t used = std::min<int64_t>(p.C, (p.M + p.run - 1) / p.run);
  for (int c = 0; c < used; ++c) {
    std::string in = fmt::format("row{}", c), out = fmt::format("out{}", c);
    npu::TileCoord mem{c, spec.shim_rows};
    l.fifos.push_back(b::fifo(in, {c, 0}, {mem}, row_bytes, 2));
    l.fifos.push_back(b::fifo(out, mem, {{c, 0}}, row_bytes, 2));
    l.links.push_back({mem, {in}, {out}, {0}});
  }
  std::vector<int64_t> tokens;
  for (int64_t t0 = 0; t0 < p.M; t0 += p.C * p.run) {  // a round: one run per column
    const size_t round_start = l.sequence.size();
    for (int c = 0; c < used; ++c) {
      int64_t first = t0 + c * p.run, n = std::min(p.run, p.M - first);
      if (n <= 0) break;
      const std::string in = fmt::format("row{}", c), out = fmt::format("out{}", c);
      for (int64_t t = first; t < first + n; ++t) {
        l.sequence.push_back(b::to_device(
            in, "table", span_pattern(0, p.H, p.V * p.H, 1, spec, "embedding table row")));
        tokens.push_back(t);
      }
      l.sequence.push_back(b::from_device(
          out, "x", span_pattern(first * p.H, n * p.H, p.M * p.H, 1, spec, "embedding x rows")));
      tokens.push_back(-1);
    }
    if (t0 > 0) l.sequence[round_start].after_wait = true;  // the last round's BDs are free
  }
  p.token_of_task.push_back(std::move(tokens));
  d.launches.push_back(std::move(l));
  return d;
}

EmbeddingPlan plan(const OpShape& shape, const npu::DeviceSpec& spec) {
  EmbeddingPlan p;
  p.M = shape.dim("M");
  p.V = shape.dim("V");
  p.H = shape.dim("H");
  if (p.M < 1 || p.V < 1 || p.H < 2 || p.H % 2)
    throw_error<LimitError>("embedding M={} V={} H={}: M, V >= 1 and an even H >= 2 (a row is "
                            "whole 4-byte DMA words)", p.M, p.V, p.H);
  p.C = spec.columns;
  p.run = spec.shim.buffer_descriptors - 1;
  if (p.run < 1)
    throw_error<LimitError>("embedding M={} V={} H={}: {} shim BDs leave none for row tasks",
                            p.M, p.V, p.H, spec.shim.buffer_descriptors);
  return p;
}

int32_t checked_id(float v, int64_t token, int64_t V) {
  if (!(v >= 0 && v < static_cast<float>(V)) || std::floor(v) != v)
    throw_error<InputError>("embedding: token {} has id {} (must be an integer in [0, {}))", token,
                            v, V);
  return static_cast<int32_t>(v);
}

class EmbeddingBuilder : public OpBuilder {
 public:
  std::string op() const override { return "embedding"; }
  BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                const TileOptions& tiles) const override {
    check_tile_keys(shape.key(), tiles, {});
    auto p = std::make_shared<EmbeddingPlan>(plan(shape, spec));
    BuiltOp out;
    out.shape = shape;
    out.design = make_design(*p, spec);
    validate_design(out.design, spec);
    out.inputs = {{"ids", {p->M}}, {"table", {p->V, p->H}}};
    out.outputs = {{"x", {p->M, p->H}}};
    out.tiles = {{"run", p->run}};
    auto d = std::make_shared<npu::Design>(out.design);
    out.pack = [p, d](size_t input, std::span<const float> v, npu::HostMemory& host) {
      if (input == 0) {
        auto* ids = reinterpret_cast<int32_t*>(host_bytes(*d, "ids", host).data());
        for (int64_t t = 0; t < p->M; ++t) ids[t] = checked_id(v[t], t, p->V);
      } else {
        f32_to_bf16(v, std::span<bf16>(host_bf16(*d, "table", host), v.size()));
      }
    };
    out.patch = [p](const npu::Design& design, const npu::HostMemory& host) {
      npu::Design patched = design;
      auto bytes = host_bytes(design, "ids", host);
      for (size_t l = 0; l < patched.launches.size(); ++l)
        for (size_t i = 0; i < patched.launches[l].sequence.size(); ++i) {
          int64_t t = p->token_of_task[l][i];
          if (t < 0) continue;
          int32_t id;
          std::memcpy(&id, bytes.data() + t * 4, 4);
          if (id < 0 || id >= p->V)
            throw_error<InputError>("embedding: token {} has id {} outside [0, {})", t, id, p->V);
          if (mutant_on(Mutant::embed_row_shift) && t == 0 && id + 1 < p->V) ++id;
          patched.launches[l].sequence[i].pattern.offset = int64_t{id} * p->H;
        }
      return patched;
    };
    out.unpack = [p, d](size_t, const npu::HostMemory& host) {
      const bf16* x = host_bf16(*d, "x", host);
      std::vector<float> v(static_cast<size_t>(p->M * p->H));
      for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(x[i]);
      return v;
    };
    return out;
  }
};

}  // namespace

void register_embedding_builder() { register_op_builder(std::make_unique<EmbeddingBuilder>()); }

}  // namespace tessera::kernels
