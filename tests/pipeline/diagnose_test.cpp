// The diagnosers (diagnose.h) end to end: each bug is planted in a tiny
// deployment - a broken builder in phase 1, a mutant, or edited packed
// weights in phase 2 - and the deploy must fail with issues.md naming the
// diagnoser whose hypothesis reproduces it. A bug none of them models must be
// reported as unknown, and an honest deploy runs none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "pipeline_test_util.h"
#include "tessera/core/bf16.h"
#include "tessera/core/mutants.h"
#include "tessera/model/config.h"
#include "tessera/model/synth.h"
#include "tessera/oracle/rope.h"
#include "tessera/pipeline/deploy.h"
#include "tessera/pipeline/diagnose.h"
#include "tessera/pipeline/reference_ops.h"

namespace tessera::pipeline {
namespace {

namespace fs = std::filesystem;

using test_util::scratch;

using test_util::slurp;

DeployOptions tiny(const std::string& name, int last_phase) {
  DeployOptions o;
  o.preset = "tiny";
  o.out = scratch(name);
  o.gate_seq = 9;
  o.continuation = 4;
  o.last_phase = last_phase;
  o.spec = npu::DeviceSpec::preset("xdna2");
  return o;
}

// A builder that delegates to the real one and plants a bug in pack/unpack
// (or in the tiles it builds with), under the real op name.
class Planted : public kernels::OpBuilder {
 public:
  using Bug = std::function<void(kernels::BuiltOp&)>;
  Planted(std::string op, Bug bug, kernels::TileOptions tiles = {})
      : real_(kernels::op_builder(op)), bug_(std::move(bug)), tiles_(std::move(tiles)) {}
  std::string op() const override { return real_.op(); }
  kernels::BuiltOp build(const kernels::OpShape& s, const npu::DeviceSpec& spec,
                         const kernels::TileOptions& t) const override {
    kernels::BuiltOp b = real_.build(s, spec, tiles_.empty() ? t : tiles_);
    if (bug_) bug_(b);
    return b;
  }

 private:
  const kernels::OpBuilder& real_;
  Bug bug_;
  kernels::TileOptions tiles_;
};

BuilderLookup with(std::shared_ptr<Planted> planted) {
  const BuilderLookup real = registered_builders();
  return [planted, real](const std::string& name) -> const kernels::OpBuilder* {
    return name == planted->op() ? planted.get() : real(name);
  };
}

struct Outcome {
  DeployReport report;
  std::string issues;
  std::string diagnosers;  // every diagnoser named in the last phase's details, space separated
};

Outcome run(const DeployOptions& o) {
  Outcome r{deploy(o), slurp(o.out / "issues.md"), ""};
  EXPECT_FALSE(r.report.passed());
  const auto& d = r.report.phases.back().details;
  if (d.is_object() && d.contains("diagnoses"))
    for (const auto& x : d["diagnoses"]) r.diagnosers += x["diagnoser"].get<std::string>() + " ";
  return r;
}

// The deploy failed at `phase`, issues.md and the failure line name `diagnoser`.
void expect_named(const Outcome& r, int phase, const std::string& diagnoser) {
  EXPECT_EQ(r.report.phases.back().phase, phase) << r.report.failure();
  EXPECT_NE(r.diagnosers.find(diagnoser + " "), std::string::npos) << r.diagnosers << "\n" << r.issues;
  EXPECT_NE(r.issues.find("likely cause: "), std::string::npos) << r.issues;
  EXPECT_NE(r.issues.find("[" + diagnoser + "]"), std::string::npos) << r.issues;
  EXPECT_NE(r.report.failure().find("likely cause:"), std::string::npos) << r.report.failure();
}

// Edits every bf16 of the packed weights whose key starts with `prefix`.
std::function<void(compiler::PackedWeights&)> edit_packed(const std::string& prefix, float (*f)(float)) {
  return [prefix, f](compiler::PackedWeights& pw) {
    for (const std::string& k : pw.keys()) {
      if (!k.starts_with(prefix)) continue;
      for (auto& [name, buf] : pw.get_mut(k)) {
        const std::span<std::byte> bytes = buf.mutable_bytes();
        for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
          uint16_t b;
          std::memcpy(&b, &bytes[i], 2);
          const uint16_t n = f32_to_bf16(f(bf16_to_f32(bf16{b}))).bits;
          std::memcpy(&bytes[i], &n, 2);
        }
      }
    }
  };
}

// tiny with Qwen2's q/k/v biases, as a model directory.
fs::path tiny_bias_model() {
  const fs::path dir = scratch("model-bias");
  model::ModelConfig c = model::preset("tiny");
  c.traits = model::arch_traits("Qwen2ForCausalLM");
  c.qkv_bias = true;
  c.num_layers = 2;
  model::write_synthetic_model(c, dir, 7, 1);
  return dir;
}

TEST(Diagnosers, RegistryHasOneEntryPerCause) {
  std::set<std::string> names;
  for (const DiagnoserInfo& d : diagnosers()) EXPECT_TRUE(names.insert(d.name).second) << d.name;
  for (const char* n : {"transposed_weight", "rope_pairing", "rope_position_offset", "bias", "gqa_head_mapping",
                        "softmax_overflow", "norm_eps_or_weight", "kv_position", "layout_mismatch", "device_limit",
                        "wrong_weight", "kv_cache_rows", "rope_table_precision", "row_view_offset"})
    EXPECT_TRUE(names.count(n)) << n;
}

std::vector<float> seeded(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = round_bf16(static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) - 0.5f);
  }
  return v;
}

OpCase op_case(const std::string& op, std::map<std::string, int64_t> dims, std::vector<std::vector<float>> in) {
  OpCase c;
  c.where = "unit";
  c.shape.op = op;
  c.shape.dims = std::move(dims);
  c.inputs = std::move(in);
  c.activation = {true, false};
  c.rows = c.shape.dim("M");
  return c;
}

// An output that passes the op's gate against the correct op is not explained away.
TEST(Diagnosers, NothingToExplainWhenTheOutputIsRight) {
  OpCase c = op_case("linear", {{"M", 4}, {"K", 16}, {"N", 8}}, {seeded(64, 1), seeded(128, 2)});
  const std::vector<std::span<const float>> in(c.inputs.begin(), c.inputs.end());
  c.npu = reference_op(c.shape, in);
  round_bf16_inplace(c.npu);
  const Diagnosis d = diagnose(c);
  EXPECT_FALSE(d.known()) << d.line();
  EXPECT_NE(d.line().find("nothing to explain"), std::string::npos) << d.line();
}

// A hypothesis the inputs cannot tell from the correct op (a missing or doubled
// bias when the bias is zero) is never named, however wrong the output.
TEST(Diagnosers, IndistinguishableHypothesisIsNotNamed) {
  OpCase c = op_case("bias_add", {{"M", 4}, {"N", 8}}, {seeded(32, 3), std::vector<float>(8, 0.0f)});
  c.npu = c.inputs[0];
  for (float& x : c.npu) x = round_bf16(x + 0.25f);
  const Diagnosis d = diagnose(c);
  EXPECT_FALSE(d.known()) << d.line();
  EXPECT_NE(d.line().find("bias: the bias missing: indistinguishable"), std::string::npos) << d.line();
}

// The LM head's input is one row of the final norm; a caller that takes the
// row before the last real token is named with the offset, and an op with no
// such input is not explained by it.
TEST(Diagnosers, RowViewTakenOneRowEarly) {
  const std::vector<float> norm = seeded(5 * 16, 5);
  OpCase c = op_case("linear", {{"M", 1}, {"K", 16}, {"N", 8}},
                     {std::vector<float>(norm.begin() + 3 * 16, norm.begin() + 4 * 16), seeded(128, 2)});
  c.row_view_input = 0;
  c.row_view_source = norm;
  c.row_view_row = 3;
  std::vector<std::vector<float>> early = c.inputs;
  early[0].assign(norm.begin() + 2 * 16, norm.begin() + 3 * 16);
  const std::vector<std::span<const float>> in(early.begin(), early.end());
  c.npu = reference_op(c.shape, in);
  round_bf16_inplace(c.npu);
  const Diagnosis d = diagnose(c);
  EXPECT_EQ(d.diagnoser, "row_view_offset") << d.line();
  EXPECT_NE(d.cause.find("wrong row"), std::string::npos) << d.line();
  EXPECT_NE(d.evidence.find("off by -1"), std::string::npos) << d.line();
  c.row_view_input = -1;
  EXPECT_NE(diagnose(c).diagnoser, "row_view_offset");
}

TEST(Diagnosers, HonestDeployRunsNone) {
  DeployOptions o = tiny("honest", 3);
  const DeployReport r = deploy(o);
  ASSERT_TRUE(r.passed()) << r.failure();
  EXPECT_EQ(slurp(o.out / "issues.md").find("diagnosis"), std::string::npos);
  for (const auto& p : r.phases) EXPECT_FALSE(p.details.is_object() && p.details.contains("diagnoses")) << p.phase;
}

TEST(Diagnosers, TransposedWeight) {
  DeployOptions o = tiny("transposed", 1);
  o.builders = with(std::make_shared<Planted>("linear", [](kernels::BuiltOp& b) {
    auto pack = b.pack;
    const int64_t N = b.shape.dim("N"), K = b.shape.dim("K");
    b.pack = [pack, N, K](size_t i, std::span<const float> v, npu::HostMemory& host) {
      if (i != 1) return pack(i, v, host);
      std::vector<float> t(v.size());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) t[static_cast<size_t>(k * N + n)] = v[static_cast<size_t>(n * K + k)];
      pack(i, t, host);
    };
  }));
  expect_named(run(o), 1, "transposed_weight");
}

// Reorders every head of rope's input 0 by `to` and its output back by `from`.
Planted::Bug rope_heads(std::function<std::vector<float>(std::span<const float>, int64_t)> to,
                        std::function<std::vector<float>(const std::vector<float>&, int64_t)> from) {
  return [to, from](kernels::BuiltOp& b) {
    const int64_t d = b.shape.dim("head_dim");
    auto pack = b.pack;
    auto unpack = b.unpack;
    b.pack = [pack, d, to](size_t i, std::span<const float> v, npu::HostMemory& host) {
      if (i != 0) return pack(i, v, host);
      pack(i, to(v, d), host);
    };
    b.unpack = [unpack, d, from](size_t o, const npu::HostMemory& host) { return from(unpack(o, host), d); };
  };
}

TEST(Diagnosers, RopePairing) {
  DeployOptions o = tiny("rope-pairing", 1);
  o.builders = with(std::make_shared<Planted>("rope", rope_heads(
      [](std::span<const float> v, int64_t d) {
        std::vector<float> p(v.size());
        for (size_t h = 0; h < v.size(); h += static_cast<size_t>(d))
          for (size_t j = 0; j < static_cast<size_t>(d / 2); ++j) {
            p[h + j] = v[h + 2 * j];
            p[h + j + static_cast<size_t>(d / 2)] = v[h + 2 * j + 1];
          }
        return p;
      },
      [](const std::vector<float>& y, int64_t d) {
        std::vector<float> out(y.size());
        for (size_t h = 0; h < y.size(); h += static_cast<size_t>(d))
          for (size_t j = 0; j < static_cast<size_t>(d / 2); ++j) {
            out[h + 2 * j] = y[h + j];
            out[h + 2 * j + 1] = y[h + j + static_cast<size_t>(d / 2)];
          }
        return out;
      })));
  expect_named(run(o), 1, "rope_pairing");
}

TEST(Diagnosers, RopePositionOffset) {
  DeployOptions o = tiny("rope-offset", 1);
  o.builders = with(std::make_shared<Planted>("rope", [](kernels::BuiltOp& b) {
    const int64_t M = b.shape.dim("M");
    auto pack = b.pack;
    b.pack = [pack, M](size_t i, std::span<const float> v, npu::HostMemory& host) {
      if (i == 0 || M < 2) return pack(i, v, host);  // the prefill pass (P = 0): positions 1..M
      const oracle::RopeTable t = oracle::rope_table(model::preset("tiny"), 1, M);
      pack(i, i == 1 ? t.cos : t.sin, host);
    };
  }));
  expect_named(run(o), 1, "rope_position_offset");
}

TEST(Diagnosers, LayoutMismatch) {
  // rope reads q written head-major as if it were token-major.
  auto swap = [](std::span<const float> v, size_t R, size_t A, size_t B) {
    std::vector<float> out(v.size());
    for (size_t r = 0; r < R; ++r)
      for (size_t a = 0; a < A; ++a)
        for (size_t e = 0; e < B; ++e) out[(a * R + r) * B + e] = v[(r * A + a) * B + e];
    return out;
  };
  DeployOptions o = tiny("layout", 1);
  o.builders = with(std::make_shared<Planted>("rope", [swap](kernels::BuiltOp& b) {
    const int64_t M = b.shape.dim("M"), H = b.shape.dim("heads"), D = b.shape.dim("head_dim");
    auto pack = b.pack;
    b.pack = [pack, swap, M, H, D](size_t i, std::span<const float> v, npu::HostMemory& host) {
      if (i != 0 || M < 2) return pack(i, v, host);
      pack(i, swap(v, static_cast<size_t>(M), static_cast<size_t>(H), static_cast<size_t>(D)), host);
    };
  }));
  expect_named(run(o), 1, "layout_mismatch");
}

TEST(Diagnosers, GqaHeadMapping) {
  DeployOptions o = tiny("gqa", 1);
  o.builders = with(std::make_shared<Planted>("attention_prefill", [](kernels::BuiltOp& b) {
    const int64_t H = b.shape.dim("heads"), KV = b.shape.dim("kv_heads"), D = b.shape.dim("head_dim");
    const auto slot = [H, KV](int64_t h) { return (h % KV) * (H / KV) + h / KV; };
    auto pack = b.pack;
    auto unpack = b.unpack;
    b.pack = [pack, slot, H, D](size_t i, std::span<const float> v, npu::HostMemory& host) {
      if (i != 0) return pack(i, v, host);
      std::vector<float> p(v.size());
      for (size_t r = 0; r < v.size() / static_cast<size_t>(H * D); ++r)
        for (int64_t h = 0; h < H; ++h)
          std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(r * H * D + h * D), D,
                      p.begin() + static_cast<std::ptrdiff_t>(r * H * D + slot(h) * D));
      pack(i, p, host);
    };
    b.unpack = [unpack, slot, H, D](size_t o2, const npu::HostMemory& host) {
      const std::vector<float> y = unpack(o2, host);
      std::vector<float> out(y.size());
      for (size_t r = 0; r < y.size() / static_cast<size_t>(H * D); ++r)
        for (int64_t h = 0; h < H; ++h)
          std::copy_n(y.begin() + static_cast<std::ptrdiff_t>(r * H * D + slot(h) * D), D,
                      out.begin() + static_cast<std::ptrdiff_t>(r * H * D + h * D));
      return out;
    };
  }));
  expect_named(run(o), 1, "gqa_head_mapping");
}

TEST(Diagnosers, SoftmaxOverflow) {
  // e^score without max subtraction: NaN rows where a score * scale > 88.72
  // (phase 1's large-score probe reaches them).
  DeployOptions o = tiny("softmax", 1);
  o.builders = with(std::make_shared<Planted>("attention_prefill", [](kernels::BuiltOp& b) {
    auto seen = std::make_shared<std::vector<std::vector<float>>>(3);
    const kernels::OpShape shape = b.shape;
    auto pack = b.pack;
    auto unpack = b.unpack;
    b.pack = [pack, seen](size_t i, std::span<const float> v, npu::HostMemory& host) {
      (*seen)[i].assign(v.begin(), v.end());
      pack(i, v, host);
    };
    b.unpack = [unpack, seen, shape](size_t o2, const npu::HostMemory& host) {
      std::vector<float> y = unpack(o2, host);
      const int64_t S = shape.dim("S"), P = shape.dim("P"), H = shape.dim("heads");
      const int64_t KV = shape.dim("kv_heads"), D = shape.dim("head_dim");
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      for (int64_t i = 0; i < S; ++i)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t t = 0; t <= P + i; ++t) {
            double dot = 0;
            for (int64_t e = 0; e < D; ++e)
              dot += (*seen)[0][static_cast<size_t>((i * H + h) * D + e)] *
                     (*seen)[1][static_cast<size_t>((t * KV + h / (H / KV)) * D + e)];
            if (dot * scale > 88.72)
              for (int64_t e = 0; e < D; ++e) y[static_cast<size_t>((i * H + h) * D + e)] = NAN;
          }
      return y;
    };
  }));
  expect_named(run(o), 1, "softmax_overflow");
}

TEST(Diagnosers, KvWrittenAtTheWrongPosition) {
  // The decode step's new row lands one row early.
  DeployOptions o = tiny("kv", 1);
  o.builders = with(std::make_shared<Planted>("kv_append", [](kernels::BuiltOp& b) {
    auto seen = std::make_shared<std::vector<std::vector<float>>>(2);
    const int64_t d = b.shape.dim("kv_dim"), pos = b.shape.dim("pos"), M = b.shape.dim("M");
    auto pack = b.pack;
    auto unpack = b.unpack;
    b.pack = [pack, seen](size_t i, std::span<const float> v, npu::HostMemory& host) {
      (*seen)[i].assign(v.begin(), v.end());
      pack(i, v, host);
    };
    b.unpack = [unpack, seen, d, pos, M](size_t o2, const npu::HostMemory& host) {
      std::vector<float> y = unpack(o2, host);
      if (pos < 1) return y;
      std::copy_n((*seen)[1].begin() + pos * d, M * d, y.begin() + pos * d);
      std::copy_n((*seen)[0].begin(), M * d, y.begin() + (pos - 1) * d);
      return y;
    };
  }));
  expect_named(run(o), 1, "kv_position");
}

// The executor's host kv_append of layer 1 writes the decode row one early:
// phase 6 names the first decode step and the layer whose kv_append it was.
TEST(Diagnosers, KvWrittenEarlyInDecodeFailsPhase6) {
  struct Reset {
    ~Reset() { set_active_mutant(Mutant::none); }
  } reset;
  set_active_mutant(Mutant::exec_kv_write_prev);
  // The mutant is in the host kv_append; decode keeps its cache resident on
  // the NPU (kv-resident), so the pass is rolled back here (its planted bug)
  // and phase 6 decodes with the host cache the mutant writes.
  DeployOptions o = tiny("kv-decode", 6);
  o.plant_pass_bug = "kv-resident";
  const Outcome r = run(o);
  expect_named(r, 6, "kv_position");
  EXPECT_NE(r.issues.find("phase 6 decode step 0 node L1.k_cache"), std::string::npos) << r.issues;
  EXPECT_NE(r.issues.find("rows written at pos -1"), std::string::npos) << r.issues;
}

// The executor binds layer 1's up weights to gate (and gate's to up).
TEST(Diagnosers, WrongWeightBound) {
  struct Reset {
    ~Reset() { set_active_mutant(Mutant::none); }
  } reset;
  set_active_mutant(Mutant::exec_swap_gate_up);
  const Outcome r = run(tiny("swap", 3));
  expect_named(r, 3, "wrong_weight");
  EXPECT_NE(r.issues.find("input 1 bound to w:L1.up_proj"), std::string::npos) << r.issues;
}

TEST(Diagnosers, NormEpsilon) {
  struct Reset {
    ~Reset() { set_active_mutant(Mutant::none); }
  } reset;
  set_active_mutant(Mutant::rmsnorm_eps_x100);
  expect_named(run(tiny("eps", 1)), 1, "norm_eps_or_weight");
}

TEST(Diagnosers, NormWeightMissing) {
  DeployOptions o = tiny("norm-weight", 2);
  o.tamper_packed = edit_packed("w:L0.attn_norm@", [](float) { return 1.0f; });
  expect_named(run(o), 2, "norm_eps_or_weight");
}

TEST(Diagnosers, BiasMissingAndDoubled) {
  const fs::path model = tiny_bias_model();
  for (auto [name, f] : {std::pair{"bias-missing", +[](float) { return 0.0f; }},
                         std::pair{"bias-doubled", +[](float x) { return 2 * x; }}}) {
    DeployOptions o = tiny(name, 2);
    o.preset.clear();
    o.model_dir = model;
    o.tamper_packed = edit_packed("w:L0.k_bias@", f);
    const Outcome r = run(o);
    expect_named(r, 2, "bias");
    EXPECT_NE(r.issues.find(std::string(name) == "bias-missing" ? "the bias missing" : "the bias added twice"),
              std::string::npos) << r.issues;
  }
}

TEST(Diagnosers, DeviceLimitWithTilesThatFit) {
  DeployOptions o = tiny("limit", 1);
  o.builders = with(std::make_shared<Planted>("linear", nullptr,
                                              kernels::TileOptions{{"gemm", 1}, {"m", 256}, {"k", 256}, {"n", 256}}));
  const Outcome r = run(o);
  expect_named(r, 1, "device_limit");
  EXPECT_NE(r.issues.find("tiles that fit: "), std::string::npos) << r.issues;
}

TEST(Diagnosers, UnknownBugIsNotMislabelled) {
  // A negated v_proj weight: no diagnoser's hypothesis is a sign flip.
  DeployOptions o = tiny("unknown", 2);
  o.tamper_packed = negate_packed_weight("w:L0.v_proj@");
  const Outcome r = run(o);
  EXPECT_EQ(r.diagnosers, "unknown ") << r.issues;
  EXPECT_NE(r.issues.find("likely cause: unknown"), std::string::npos) << r.issues;
  EXPECT_NE(r.issues.find("node L0.v "), std::string::npos) << r.issues;
  EXPECT_NE(r.issues.find("transposed_weight: "), std::string::npos) << "the hypotheses tried are listed\n"
                                                                    << r.issues;
}

}  // namespace
}  // namespace tessera::pipeline
