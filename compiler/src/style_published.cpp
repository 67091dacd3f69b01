// The iron and mlir-air plan styles (style_published.h): which graph nodes go
// into which dispatch, what runs on the host, with which tiles and padding.
// Timing, dumps and bounds live in style_published_time.cpp.
#include "tessera/compiler/style_published.h"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "tessera/compiler/graph.h"
#include "tessera/core/error.h"
#include "tessera/npu/designs.h"
#include "tessera/npu/validator.h"

namespace tessera::compiler {

bool is_published_style(std::string_view name) { return name == "iron" || name == "mlir-air"; }

PublishedStyle parse_published_style(std::string_view name) {
  if (name == "iron") return PublishedStyle::iron;
  if (name == "mlir-air") return PublishedStyle::mlir_air;
  throw_error<UsageError>("unknown published style '{}' (iron, mlir-air)", name);
}

const char* published_style_name(PublishedStyle s) {
  return s == PublishedStyle::iron ? "iron" : "mlir-air";
}

namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
int64_t bf16_bytes(const Shape& s) { return shape_numel(s) * 2; }

// mlir-air pads every dimension that is not a multiple of 1024 (shim BD
// budget at seq 2048); the April deployments' rule.
constexpr int64_t kAirDimQuantum = 1024;
constexpr int64_t kAirSeq = 2048;
constexpr int64_t kAirLmPartitions = 8;
// FFN sizes above this split O + FFN into three prefill dispatches.
constexpr int64_t kAirFusedFfnMax = 8192;
// Hidden sizes from this up cannot use the 2-dispatch decode (> 4 core rows).
constexpr int64_t kAirFusedDecodeHiddenMax = 2048;
// The FlashAttention kernel's native head_dim (seq-first, no transposes).
constexpr int64_t kAirSeqFirstHeadDim = 64;

// The published registry configurations, in the builders' vocabulary.
kernels::TileOptions air_tiles(const kernels::OpShape& s, bool decode) {
  const std::string& op = s.op;
  if (op == "linear" && s.dim("M") > 1) return {{"gemm", 1}, {"m", 64}, {"k", 32}, {"n", 64}};
  if (op == "linear") return {{"gemm", 0}, {"columns", 8}, {"rows", 1}};  // herd_m = 8
  // LQP 256 (4 q tiles), LKP 64, a 4-deep cascade (the builder halves the
  // blocks for head_dim 128 to fit L1), K and V on their own channels
  // (QKIn_s / VIn_s, attn_npu2_seqfirst.py), every K/V block computed (the
  // kernel masks; causal_skip came after the deployment) and a wait after
  // every launch iteration (runtime_loop_tiling_sizes [1, 1]).
  if (op == "attention_prefill")
    return {{"cascade", 4}, {"qtiles", 4}, {"kv_split", 1}, {"causal_skip", 0}, {"run_iters", 1}};
  // Decode: RMSNorm and RoPE on one core ([1,1]), the adds and SiLU x mul on
  // [8,1] (rms_gemv_rope_multi.py, o_gemv_ffn_multi.py).
  if (decode && (op == "silu_mul" || op == "residual_add")) return {{"rows", 1}};
  if (op == "rmsnorm" || op == "rope" || op == "silu_mul" || op == "residual_add" ||
      op == "bias_add" || op == "head_rmsnorm")
    return decode ? kernels::TileOptions{{"columns", 1}, {"rows", 1}}
                  : kernels::TileOptions{{"rows", 1}};  // herd [8,1] / [1,1]
  return {};
}

// IRON's Llama deployment builds its GEMMs with 64 x 64 x 64 core tiles on 8
// columns (applications/llama_3.2_1b/src/block/gqa.py, aie_gemm_config).
constexpr int64_t kIronTile = 64;
constexpr int kIronColumns = 8;
// Bytes a bf16 -> fp32 -> bf16 round trip touches per bf16 byte: (2 + 4 + 4 + 2) / 2.
constexpr int64_t kIronConvertBytesPerBf16Byte = 6;
bool is_gemm(const kernels::OpShape& s) { return s.op == "linear" && s.dim("M") > 1; }
kernels::TileOptions iron_tiles(const kernels::OpShape& s) {
  if (is_gemm(s)) return {{"gemm", 1}, {"m", kIronTile}, {"k", kIronTile}, {"n", kIronTile}};
  return {};
}

// IRON's GEMM operator is its own whole-array design (IRON example/gemm/
// gemm.py, the mlir-aie whole_array structure npu::gemm_design models): A
// and B re-streamed from DDR for every C tile row / column, no L2 reuse. The
// linear builder's design reuses operands IRON's does not, so the iron style
// times IRON's structure; the built linear op still names the tensors.
// aie_gemm.py _get_padded_dims pads M to m x 4 rows, K to k, N to n x columns.
std::shared_ptr<const kernels::BuiltOp> iron_gemm(const kernels::BuiltOp& linear,
                                                  const npu::DeviceSpec& spec) {
  static std::once_flag registered;
  // gemm_design calls the microbenchmark kernels; their names are disjoint
  // from the tile kernels' (kernels/src/tile_kernels.cpp).
  std::call_once(registered, [] { npu::register_microbench_kernels(npu::KernelRegistry::global()); });
  const int64_t rows = spec.compute_rows;
  npu::GemmParams g;
  g.M = round_up(linear.shape.dim("M"), kIronTile * rows);
  g.K = round_up(linear.shape.dim("K"), kIronTile);
  g.N = round_up(linear.shape.dim("N"), kIronTile * kIronColumns);
  g.m = g.k = g.n = kIronTile;
  g.columns = std::min<int>(kIronColumns, spec.columns);
  auto op = std::make_shared<kernels::BuiltOp>(linear);
  op->design = npu::gemm_design(g, spec);
  npu::validate(op->design, spec);
  return op;
}

}  // namespace

std::shared_ptr<const kernels::BuiltOp> omit_pingpong(const kernels::BuiltOp& op,
                                                      const npu::DeviceSpec& spec) {
  auto out = std::make_shared<kernels::BuiltOp>(op);
  auto on_core = [&](npu::TileCoord t) { return spec.kind_of_row(t.row) == npu::TileKind::compute; };
  for (npu::Launch& l : out->design.launches) {
    // A core holding k objects at once (K and V of one block) keeps k buffers.
    std::map<std::string, int64_t> held;
    std::function<void(const std::vector<npu::CoreOp>&)> scan = [&](const auto& ops) {
      for (const npu::CoreOp& o : ops) {
        if (o.kind == npu::CoreOp::Kind::acquire) held[o.fifo] = std::max(held[o.fifo], o.count);
        scan(o.body);
      }
    };
    for (const npu::Core& c : l.cores) scan(c.program);
    for (npu::Fifo& f : l.fifos)
      if (on_core(f.producer) || std::any_of(f.consumers.begin(), f.consumers.end(), on_core))
        f.depth = static_cast<int>(std::max<int64_t>(1, held[f.name]));
  }
  npu::validate(out->design, spec);
  return out;
}

namespace {

class Lowering {
 public:
  Lowering(const model::ModelConfig& c, PublishedStyle style, DesignCache& cache, StylePlan& out)
      : c_(c), style_(style), cache_(cache), out_(out) {}

  StyleLaunch launch(const Node& n, const std::string& name, bool decode, bool single = false) {
    kernels::OpShape shape = n.shape;
    kernels::TileOptions tiles =
        style_ == PublishedStyle::mlir_air ? air_tiles(shape, decode) : iron_tiles(shape);
    StyleLaunch l{name, nullptr};
    try {
      l.op = cache_.get(shape, tiles).op;
    } catch (const LimitError& e) {
      if (tiles.empty()) throw;
      note(fmt::format("{}: published tiles do not build here ({}); builder defaults used",
                       shape_text(shape), e.what()));
      l.op = cache_.get(shape, {}).op;
    }
    if (style_ == PublishedStyle::iron && is_gemm(shape)) l.op = iron_gemm_for(*l.op);
    if (single) l.op = single_buffered(*l.op);
    return l;
  }

  // A dispatch of the given layer-0 (or model-level) nodes, in graph order.
  // `single`: compiled with omit_pingpong (every core buffer single).
  StyleStep dispatch(const std::string& name, const Graph& g, int layer,
                     const std::set<std::string>& nodes, int64_t repeat, bool decode,
                     bool single = false) {
    StyleStep s;
    s.name = name;
    s.repeat = repeat;
    std::vector<const Node*> members;
    for (const Node& n : g.nodes) {
      if (n.layer != layer || !nodes.count(n.name)) continue;
      s.launches.push_back(launch(n, n.name, decode, single));
      members.push_back(&n);
    }
    if (s.launches.empty())
      throw_error<InternalError>("style {}: dispatch '{}' has no nodes", published_style_name(style_),
                                 name);
    const BoBytes bo = bo_bytes(members, s.launches);
    if (style_ == PublishedStyle::iron) {
      // aie_base.py run_runlist: every BO of the runlist synced to the device
      // and back; forward() copies inputs in and outputs out; one Python call.
      s.sync_bytes = 2 * (bo.weights + bo.tables + bo.inputs + bo.intermediates + bo.outputs);
      s.copy_bytes = bo.tables + bo.inputs + bo.outputs;  // IRON passes the angle slice per call
      s.host_calls = 1;
      // utils.py: torch_to_numpy = .float() (read 2 B, write 4 B per element)
      // then .astype(bfloat16) (read 4, write 2); numpy_to_torch the mirror.
      s.convert_bytes = kIronConvertBytesPerBf16Byte * s.copy_bytes;
    } else {
      // mlir-air writes the activation inputs (copy + to-device sync); weights
      // and RoPE tables are pre-loaded, intermediates skipped, outputs read
      // zero-copy.
      s.sync_bytes = bo.inputs;
      s.copy_bytes = bo.inputs;
    }
    return s;
  }

  void note(std::string text) {
    if (std::find(out_.notes.begin(), out_.notes.end(), text) == out_.notes.end())
      out_.notes.push_back(std::move(text));
  }

 private:
  // The buffer objects a dispatch's nodes touch, once each: weights, host
  // tables (RoPE cos / sin), activation inputs produced outside it, outputs
  // nothing inside reads, and intermediates (outputs read inside).
  struct BoBytes {
    int64_t weights = 0, tables = 0, inputs = 0, outputs = 0, intermediates = 0;
  };
  static BoBytes bo_bytes(const std::vector<const Node*>& nodes,
                          const std::vector<StyleLaunch>& launches) {
    std::set<std::string> produced, read, seen;
    for (const Node* n : nodes) produced.insert(n->output.str());
    for (const Node* n : nodes)
      for (const auto& in : n->inputs) read.insert(in.str());
    BoBytes b;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = *nodes[i];
      const kernels::BuiltOp& op = *launches[i].op;
      for (size_t j = 0; j < n.inputs.size() && j < op.inputs.size(); ++j) {
        const ValueRef& v = n.inputs[j];
        if (produced.count(v.str()) || !seen.insert(v.str()).second) continue;
        const int64_t bytes = bf16_bytes(op.inputs[j].shape);
        if (v.kind == ValueKind::weight) b.weights += bytes;
        else if (v.kind == ValueKind::host && v.layer < 0) b.tables += bytes;
        else b.inputs += bytes;
      }
      int64_t out = 0;
      for (const auto& o : op.outputs) out += bf16_bytes(o.shape);
      (read.count(n.output.str()) ? b.intermediates : b.outputs) += out;
    }
    return b;
  }

  std::shared_ptr<const kernels::BuiltOp> single_buffered(const kernels::BuiltOp& op) {
    auto& slot = single_[&op];
    if (slot) return slot;
    try {
      slot = omit_pingpong(op, cache_.spec());
    } catch (const LimitError& e) {
      note(fmt::format("{}: omit_pingpong does not build here ({}); ping-pong kept",
                       shape_text(op.shape), e.what()));
      slot = std::make_shared<kernels::BuiltOp>(op);
    }
    return slot;
  }

  std::shared_ptr<const kernels::BuiltOp> iron_gemm_for(const kernels::BuiltOp& linear) {
    auto& slot = iron_gemms_[shape_text(linear.shape)];
    if (!slot) slot = iron_gemm(linear, cache_.spec());
    return slot;
  }

  const model::ModelConfig& c_;
  PublishedStyle style_;
  DesignCache& cache_;
  StylePlan& out_;
  std::map<std::string, std::shared_ptr<const kernels::BuiltOp>> iron_gemms_;
  std::map<const kernels::BuiltOp*, std::shared_ptr<const kernels::BuiltOp>> single_;
};

StyleStep host_step(std::string name, int64_t repeat, int64_t bytes, double flops) {
  StyleStep s;
  s.name = std::move(name);
  s.npu = false;
  s.repeat = repeat;
  s.host_bytes = bytes;
  s.host_flops = flops;
  return s;
}

// IRON: every node of a layer its own dispatch, SwiGLU one runlist dispatch;
// KV append happens inside the RoPE / V outputs (no dispatch of its own); the
// embedding gather and argmax stay with the host (194 dispatches per token).
std::vector<StyleStep> lower_iron(const model::ModelConfig& c, const Graph& g, Lowering& L) {
  const bool decode = g.decode();
  std::vector<StyleStep> steps;
  const int64_t S = g.seq;
  steps.push_back(host_step("embedding", 1, 2 * S * c.hidden_size * 2 + S * 4, 0));
  std::set<std::string> swiglu = {"gate", "up", "act", "down"};
  bool swiglu_done = false;
  for (const Node& n : g.nodes) {
    if (n.layer != 0 || n.shape.op == "kv_append") continue;
    if (swiglu.count(n.name)) {
      if (!swiglu_done) steps.push_back(L.dispatch("swiglu", g, 0, swiglu, c.num_layers, decode));
      swiglu_done = true;
      continue;
    }
    steps.push_back(L.dispatch(n.name, g, 0, {n.name}, c.num_layers, decode));
  }
  steps.push_back(L.dispatch("final_norm", g, -1, {"final_norm"}, 1, decode));
  steps.push_back(L.dispatch("lm_head", g, -1, {"logits"}, 1, decode));
  steps.push_back(host_step("argmax", 1, c.vocab_size * 2, 0));
  return steps;
}

// The LM head over the last row as one GEMV dispatch of 8 partitions.
StyleStep air_lm_head(const model::ModelConfig& c, const Graph& g, Lowering& L) {
  const Node* logits = nullptr;
  for (const Node& n : g.nodes)
    if (n.name == "logits") logits = &n;
  TESSERA_CHECK(logits, "graph {} has no logits node", g.model);
  Node part = *logits;
  part.shape.dims["N"] = round_up((c.vocab_size + kAirLmPartitions - 1) / kAirLmPartitions,
                                  kAirDimQuantum);
  StyleStep s;
  s.name = "lm_head";
  for (int64_t i = 0; i < kAirLmPartitions; ++i)
    s.launches.push_back(L.launch(part, fmt::format("lm_head[{}]", i), true));
  return s;
}

std::vector<StyleStep> lower_air(const model::ModelConfig& c, const Graph& g, Lowering& L) {
  const bool decode = g.decode();
  const int64_t S = g.seq, T = g.past + g.seq, H = c.hidden_size, kvd = c.kv_dim();
  const int64_t layers = c.num_layers;
  std::vector<StyleStep> steps;
  // Tokenize + pad + embedding gather on the host, then the residual stream
  // is handed to the NPU (one sync).
  steps.push_back(host_step("embedding", 1, 2 * S * H * 2 + S * 4, 0));
  std::set<std::string> attn_in = {"attn_norm", "q", "q_bias", "k", "k_bias", "v", "v_bias",
                                   "q_norm", "k_norm", "q_rot", "k_rot"};
  std::set<std::string> o_ffn = {"o", "h_mid", "ffn_norm", "gate", "up", "act", "down", "h_out"};
  if (!decode) {
    steps.push_back(L.dispatch("rms_gemms_rope", g, 0, attn_in, layers, false));
    if (c.head_dim != kAirSeqFirstHeadDim) {
      L.note(fmt::format("head_dim {} != {}: host seq <-> head transposes around FlashAttention",
                         c.head_dim, kAirSeqFirstHeadDim));
      steps.push_back(host_step("transpose_qkv", layers, 2 * S * (c.q_dim() + 2 * kvd) * 2, 0));
    }
    // Compiled with omit_pingpong "all" (the pipeline's backend preset): every
    // core buffer single. K and V arrive on their own channels (kv_split), so
    // each refills while the core works on the other.
    steps.push_back(L.dispatch("flash_attn", g, 0, {"attn_out"}, layers, false, true));
    if (c.head_dim != kAirSeqFirstHeadDim)
      steps.push_back(host_step("transpose_o", layers, 2 * S * c.q_dim() * 2, 0));
    // K and V (seq-first) into the host cache (n_kv_heads, max_seq, head_dim).
    steps.push_back(host_step("kv_copy_out", layers, 2 * 2 * S * kvd * 2, 0));
    if (c.intermediate_size > kAirFusedFfnMax) {
      steps.push_back(L.dispatch("o_add_norm", g, 0, {"o", "h_mid", "ffn_norm"}, layers, false));
      steps.push_back(L.dispatch("gate_up_silu", g, 0, {"gate", "up", "act"}, layers, false));
      steps.push_back(L.dispatch("down_add", g, 0, {"down", "h_out"}, layers, false));
    } else {
      steps.push_back(L.dispatch("o_ffn", g, 0, o_ffn, layers, false));
    }
  } else if (H > kAirFusedDecodeHiddenMax || c.qkv_bias) {
    steps.push_back(L.dispatch("rms_q", g, 0, {"attn_norm", "q", "q_bias", "q_norm"}, layers, true));
    steps.push_back(L.dispatch("kv_rope", g, 0, {"k", "k_bias", "v", "v_bias", "k_norm", "q_rot",
                                                 "k_rot"}, layers, true));
  } else {
    steps.push_back(L.dispatch("rms_gemv_rope", g, 0, attn_in, layers, true));
  }
  if (decode) {
    // GQA attention over the host bf16 cache: read K and V of T positions,
    // 2 MACs per (head, position, dim).
    steps.push_back(host_step("cpu_attention", layers, 2 * T * kvd * 2 + 2 * c.q_dim() * 2,
                              4.0 * c.num_heads * T * c.head_dim));
    steps.push_back(host_step("kv_append", layers, 2 * 2 * kvd * 2, 0));
    if (H > kAirFusedDecodeHiddenMax || c.qkv_bias) {
      steps.push_back(L.dispatch("o_add_norm", g, 0, {"o", "h_mid", "ffn_norm"}, layers, true));
      steps.push_back(L.dispatch("gate_up_silu", g, 0, {"gate", "up", "act"}, layers, true));
      steps.push_back(L.dispatch("down_add", g, 0, {"down", "h_out"}, layers, true));
    } else {
      // OGF_BACKEND (backend_presets.py): omit_pingpong "all", since L1 cannot
      // hold two buffers for the K = 8192 down GEMV; rms_gemv_rope and the LM
      // head keep ping-pong.
      steps.push_back(L.dispatch("o_gemv_ffn", g, 0, o_ffn, layers, true, true));
    }
  }
  // Final RMSNorm of the last row on the CPU, LM head, argmax on the CPU.
  steps.push_back(host_step("final_norm", 1, 3 * H * 2, 4.0 * H));
  steps.push_back(air_lm_head(c, g, L));
  steps.push_back(host_step("argmax", 1, c.vocab_size * 2, 0));
  return steps;
}

}  // namespace

StylePlan plan_published(const model::ModelConfig& config, PublishedStyle style, int64_t seq,
                         int64_t decode_at, DesignCache& cache) {
  StylePlan p;
  p.model = config.name;
  p.style = style;
  p.prompt = seq;
  model::ModelConfig c = config;
  if (style == PublishedStyle::mlir_air) {
    c.hidden_size = round_up(c.hidden_size, kAirDimQuantum);
    c.intermediate_size = round_up(c.intermediate_size, kAirDimQuantum);
    seq = std::max(seq, kAirSeq);
  }
  p.seq = seq;
  p.decode_at = decode_at;
  p.hidden = c.hidden_size;
  p.intermediate = c.intermediate_size;
  Lowering L(c, style, cache, p);
  if (c.hidden_size != config.hidden_size || c.intermediate_size != config.intermediate_size)
    L.note(fmt::format("padded hidden {} -> {}, FFN {} -> {} (multiples of {})", config.hidden_size,
                       c.hidden_size, config.intermediate_size, c.intermediate_size,
                       kAirDimQuantum));
  const Graph pre = build_graph(c, seq, 0);
  const Graph dec = build_graph(c, 1, decode_at);
  if (style == PublishedStyle::iron) {
    p.prefill = lower_iron(c, pre, L);
    p.decode = lower_iron(c, dec, L);
  } else {
    p.prefill = lower_air(c, pre, L);
    p.decode = lower_air(c, dec, L);
  }
  return p;
}

}  // namespace tessera::compiler
