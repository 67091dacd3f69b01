// Plan lowering: which steps go to the host in which style, memoized builds,
// the weight layout policy (one prefill and one decode layout per linear
// weight, whatever M), buffers, context limits and golden dumps.
// Golden dumps: plan_golden_slow_test.cpp.
#include <cmath>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/compiler/plan.h"
#include "tessera/core/error.h"
#include "compiler_test_util.h"

namespace tessera::compiler {
namespace {

using testing_util::with_layers;

using testing_util::small_vocab;

using testing_util::cache;

Plan lower_style(const model::ModelConfig& c, int64_t S, int64_t P, PlanStyle style) {
  PlanOptions o;
  o.style = style;
  return lower(c, S, P, cache(), o);
}

std::string hash_of(const std::string& key) { return key.substr(key.find('@')); }

const Step& step_named(const Plan& p, const std::string& name) {
  for (const Step& s : p.steps)
    if (s.name() == name) return s;
  throw std::runtime_error("no step " + name);
}

const Launch& launch_named(const Plan& p, const std::string& name) {
  for (const Step& s : p.steps)
    for (const Launch& l : s.launches)
      if (l.name == name) return l;
  throw std::runtime_error("no launch " + name);
}

TEST(PlanStyle, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(parse_plan_style("per-op"), PlanStyle::per_op);
  EXPECT_EQ(parse_plan_style("default"), PlanStyle::standard);
  EXPECT_STREQ(plan_style_name(PlanStyle::standard), "default");
  EXPECT_THROW(parse_plan_style("fused"), UsageError);
}

TEST(Plan, PerOpDispatchesEveryNodeDefaultMovesDataOpsToHost) {
  const auto c = model::preset("tiny");
  const Plan per_op = lower_style(c, 17, 0, PlanStyle::per_op);
  PlanOptions o;
  o.disabled = {"fuse"};
  const Plan def = lower(c, 17, 0, cache(), o);
  ASSERT_EQ(per_op.steps.size(), per_op.graph.nodes.size());
  ASSERT_EQ(def.steps.size(), def.graph.nodes.size());
  EXPECT_EQ(per_op.dispatches(), static_cast<int64_t>(per_op.steps.size()));
  for (const Step& s : def.steps) {
    ASSERT_EQ(s.launches.size(), 1u);
    const std::string& op = s.front().shape.op;
    const bool host = op == "embedding" || op == "kv_append" || op == "argmax";
    EXPECT_EQ(s.kind, host ? StepKind::host : StepKind::npu) << s.name();
    EXPECT_EQ(s.bound() == "host", host) << s.name();
    EXPECT_GT(s.seconds(), 0) << s.name();
    if (host) {
      EXPECT_EQ(s.front().op, nullptr) << s.name();
    }
  }
  // Per layer: the two kv_append nodes leave the NPU.
  EXPECT_EQ(def.dispatches_per_layer(), per_op.dispatches_per_layer() - 2);
  EXPECT_EQ(def.dispatches(), per_op.dispatches() - 2 * c.num_layers - 2);
  EXPECT_LT(def.predicted_seconds(), per_op.predicted_seconds());
}

TEST(Plan, StepTimesAddUpAndFollowTheHostModel) {
  PlanOptions o;
  o.host.bytes_per_second = 1e9;
  o.host.step_overhead_seconds = 1e-6;
  const auto c = model::preset("tiny");
  o.disabled = {"fuse"};
  const Plan p = lower(c, 5, 0, cache(), o);
  double sum = 0;
  for (const Step& s : p.steps) sum += s.seconds();
  EXPECT_DOUBLE_EQ(p.predicted_seconds(), sum);
  // embedding: 5 ids (int32) + 5 rows read + 5 rows written, bf16.
  const double embed_bytes = 5 * 4 + 2 * 5 * c.hidden_size * 2;
  EXPECT_DOUBLE_EQ(step_named(p, "embed").host_seconds, embed_bytes / 1e9 + 1e-6);
  // rmsnorm re-layout: x in and y out, [5, hidden] bf16 each; the weight is packed offline.
  const Step& norm = step_named(p, "L0.attn_norm");
  EXPECT_DOUBLE_EQ(norm.relayout_seconds, 2.0 * 5 * c.hidden_size * 2 / 1e9);
  EXPECT_DOUBLE_EQ(norm.seconds(), norm.front().timing->total_seconds + norm.relayout_seconds);
}

TEST(Plan, ContextDefaultsToTheModelCappedAndLimitsSeqPlusPast) {
  auto c = model::preset("tiny");  // max_position_embeddings 2048
  EXPECT_EQ(lower_style(c, 3, 0, PlanStyle::standard).context, 2048);
  c.max_position_embeddings = 131072;  // Llama-3.2's
  EXPECT_EQ(lower_style(c, 3, 0, PlanStyle::standard).context, 4096);
  c.max_position_embeddings = 2048;
  PlanOptions o;
  o.context = 64;
  EXPECT_EQ(lower(c, 1, 63, cache(), o).context, 64);
  try {
    lower(c, 2, 63, cache(), o);
    FAIL() << "S + P > context must throw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("context 64"), std::string::npos) << e.what();
  }
}

TEST(Plan, BuildsAreMemoizedAcrossLayersAndPlans) {
  DesignCache local(npu::DeviceSpec::preset("xdna2"));
  const auto c = model::preset("tiny");
  const Plan p = lower(c, 9, 0, local);
  const size_t after_prefill = local.size();
  // One build per unique (shape, tiles): layers share theirs.
  EXPECT_LT(after_prefill, static_cast<size_t>(p.dispatches()));
  lower(c, 9, 0, local);
  EXPECT_EQ(local.size(), after_prefill);
  // Decode positions only add the shapes that depend on P (attention, kv_append).
  lower(c, 1, 9, local);
  const size_t after_decode = local.size();
  lower(c, 1, 10, local);
  // attention_decode T=11, plus what kv-resident tries (and drops for tiny's
  // short cache): kv_append T=11 on the NPU and the attention reading it resident.
  EXPECT_EQ(local.size(), after_decode + 3);
  // Same (shape, tiles) -> the same BuiltOp object.
  const Plan q = lower(c, 9, 0, local);
  EXPECT_EQ(launch_named(p, "L0.q").op.get(), launch_named(q, "L1.q").op.get());
}

TEST(Plan, WeightLayoutsNameWeightInputsOnly) {
  const Plan p = lower_style(small_vocab("qwen2.5-0.5b", 2), 17, 0, PlanStyle::per_op);
  for (const Step& st : p.steps)
    for (const Launch& s : st.launches) {
      const Node& n = p.graph.nodes[s.node];
      ASSERT_EQ(s.weight_layouts.size(), n.inputs.size()) << s.name;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i].kind == ValueKind::weight)
          EXPECT_EQ(s.weight_layouts[i].rfind(n.inputs[i].str() + "@", 0), 0u) << s.name;
        else
          EXPECT_EQ(s.weight_layouts[i], "") << s.name;
      }
    }
  // Same op, same packing: layers differ only in the weight's name.
  EXPECT_EQ(launch_named(p, "L0.q_pre_bias").weight_layouts[1],
            "w:L0.q_proj" + hash_of(launch_named(p, "L1.q_pre_bias").weight_layouts[1]));
  EXPECT_EQ(launch_named(p, "L0.q").weight_layouts[1],
            "w:L0.q_bias" + hash_of(launch_named(p, "L1.q").weight_layouts[1]));
  // Default style: the host gathers rows of the plain table.
  const Plan d = lower_style(small_vocab("qwen2.5-0.5b", 2), 17, 0, PlanStyle::standard);
  EXPECT_EQ(launch_named(d, "embed").weight_layouts[1], "w:embed_tokens@table");
}

// The W layout of a prefill linear must not depend on M: one packed copy
// serves every prompt length. M = 1 (decode) has its own GEMV layout.
TEST(Plan, PrefillWeightLayoutIsTheSameForEveryM) {
  const npu::DeviceSpec& spec = cache().spec();
  for (const char* preset : {"llama-3.2-1b", "qwen2.5-0.5b", "smollm2-135m"}) {
    const Graph g = build_graph(with_layers(preset, 1), 17);
    std::set<std::pair<int64_t, int64_t>> kn;
    for (const Node& n : g.nodes)
      if (n.shape.op == "linear" && n.shape.dim("M") > 1)
        kn.insert({n.shape.dim("K"), n.shape.dim("N")});
    ASSERT_GE(kn.size(), 3u) << preset;
    const ValueRef w{ValueKind::weight, "w", 0, false};
    for (const auto& [K, N] : kn) {
      std::set<std::string> prefill_keys;
      for (int64_t M : {2, 17, 64, 300, 2048}) {
        const kernels::OpShape s{"linear", {{"M", M}, {"K", K}, {"N", N}}, {}};
        const auto& e = cache().get(s, layout_tiles(s, spec));
        prefill_keys.insert(cache().layout(w, e, 1).key);
      }
      EXPECT_EQ(prefill_keys.size(), 1u) << preset << " K=" << K << " N=" << N;
      const kernels::OpShape d{"linear", {{"M", 1}, {"K", K}, {"N", N}}, {}};
      EXPECT_TRUE(layout_tiles(d, spec).empty());
      const std::string decode_key = cache().layout(w, cache().get(d, {}), 1).key;
      EXPECT_EQ(prefill_keys.count(decode_key), 0u) << preset << " K=" << K << " N=" << N;
    }
  }
}

// The same, byte for byte, for a real weight rather than the probe: the
// buffers M = 2 and M = 2048 designs pack for smollm2-135m's gate_proj.
TEST(Plan, PrefillPackedWeightBytesMatchAcrossM) {
  const int64_t K = 576, N = 1536;
  std::vector<float> w(static_cast<size_t>(K * N));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.001f * static_cast<float>(i * i % 9973));
  std::vector<npu::HostMemory> packed;
  for (int64_t M : {2, 2048}) {
    const kernels::OpShape s{"linear", {{"M", M}, {"K", K}, {"N", N}}, {}};
    const auto& e = cache().get(s, layout_tiles(s, cache().spec()));
    packed.emplace_back();
    e.op->pack(1, w, packed.back());
  }
  ASSERT_FALSE(packed[0].empty());
  EXPECT_TRUE(packed[0] == packed[1]);
}

TEST(Plan, LayoutKeyHashesPackedBytes) {
  // The key is a function of the packing: the cached and the uncached paths
  // agree, and a different blocking (another n) gives another key.
  const kernels::OpShape s{"linear", {{"M", 40}, {"K", 256}, {"N", 384}}, {}};
  const ValueRef w{ValueKind::weight, "q_proj", 0, false};
  const auto tiles = layout_tiles(s, cache().spec());
  const auto& e = cache().get(s, tiles);
  EXPECT_EQ(cache().layout(w, e, 1).key, weight_layout_key(w, *e.op, 1));
  auto other = tiles;
  other["n"] = tiles.at("n") / 2;
  const auto& e2 = cache().get(s, other);
  EXPECT_NE(weight_layout_key(w, *e2.op, 1), weight_layout_key(w, *e.op, 1));
  // The packed size is every "w_c<column>" buffer of the linear design.
  int64_t w_bytes = 0;
  for (const auto& h : e.op->design.host_buffers)
    if (h.name.rfind("w_c", 0) == 0) w_bytes += h.bytes;
  EXPECT_EQ(cache().layout(w, e, 1).bytes, w_bytes);
}

TEST(Plan, LayoutKeyOutlivesItsCacheButNotItsDesign) {
  // Probes are memoized across caches (plan.cpp ProbeMemo): a fresh cache's
  // key must still be the probe of its own design, whatever was probed
  // before under the same shape with other tiles or on another spec.
  const kernels::OpShape s{"linear", {{"M", 24}, {"K", 256}, {"N", 512}}, {}};
  const ValueRef w{ValueKind::weight, "up_proj", 0, false};
  for (const char* spec : {"xdna2", "xdna1"}) {
    DesignCache first{npu::DeviceSpec::preset(spec)};
    const auto tiles = layout_tiles(s, first.spec());
    auto other = tiles;
    other["n"] = tiles.at("n") / 2;
    for (const auto& t : {tiles, other}) {
      DesignCache fresh{npu::DeviceSpec::preset(spec)};
      const auto& e = fresh.get(s, t);
      first.layout(w, first.get(s, t), 1);
      EXPECT_EQ(fresh.layout(w, e, 1).key, weight_layout_key(w, *e.op, 1)) << spec;
    }
  }
  DesignCache a{npu::DeviceSpec::preset("xdna2")}, b{npu::DeviceSpec::preset("xdna1")};
  const auto& ea = a.get(s, layout_tiles(s, a.spec()));
  const auto& eb = b.get(s, layout_tiles(s, b.spec()));
  EXPECT_EQ(a.layout(w, ea, 1).key, weight_layout_key(w, *ea.op, 1));
  EXPECT_EQ(b.layout(w, eb, 1).key, weight_layout_key(w, *eb.op, 1));
}

TEST(Plan, BuffersCoverWeightsActivationsCacheAndIo) {
  const auto c = small_vocab("qwen3-0.6b", 2);
  const Plan p = lower_style(c, 17, 0, PlanStyle::standard);
  std::set<std::string> keys;
  for (const Step& s : p.steps)
    for (const Launch& l : s.launches)
      for (const auto& k : l.weight_layouts)
        if (!k.empty()) keys.insert(k);
  std::map<BufferKind, int> count;
  std::set<std::string> names;
  for (const BufferDecl& b : p.buffers) {
    ++count[b.kind];
    EXPECT_TRUE(names.insert(b.name).second) << "duplicate buffer " << b.name;
    EXPECT_GT(b.bytes, 0) << b.name;
    if (b.kind == BufferKind::weight) {
      EXPECT_EQ(keys.count(b.name), 1u) << b.name;
    }
    if (b.kind == BufferKind::kv_cache) {
      EXPECT_EQ(b.bytes, p.context * c.kv_dim() * 2) << b.name;
    }
  }
  EXPECT_EQ(count[BufferKind::weight], static_cast<int>(keys.size()));
  EXPECT_EQ(count[BufferKind::kv_cache], 2 * 2);
  for (const char* io : {"host:token_ids", "host:rope_cos", "host:rope_sin", "logits"})
    EXPECT_EQ(names.count(io), 1u) << io;
  EXPECT_EQ(names.count("L1.h_out"), 1u);
}

TEST(Plan, DumpAndJsonCarryTheTotals) {
  const Plan p = lower_style(model::preset("tiny"), 17, 0, PlanStyle::standard);
  const std::string d = p.dump();
  EXPECT_EQ(d.rfind("plan tiny style=default S=17 P=0 context=2048 spec=xdna2\n", 0), 0u) << d;
  EXPECT_NE(d.find("\ntotal "), std::string::npos);
  EXPECT_NE(d.find("\nbound "), std::string::npos);
  const nlohmann::json j = p.to_json();
  EXPECT_EQ(j["dispatches"], p.dispatches());
  EXPECT_EQ(j["steps"].size(), p.steps.size());
  EXPECT_DOUBLE_EQ(j["predicted_seconds"].get<double>(), p.predicted_seconds());
  // The bounding terms split the total; host re-layout is a term of its own.
  double sum = 0, relayout = 0;
  for (const auto& b : j["bounds"]) {
    sum += b["seconds"].get<double>();
    if (b["bound"] == "relayout") relayout = b["seconds"].get<double>();
  }
  EXPECT_NEAR(sum, p.predicted_seconds(), 1e-12);
  double want_relayout = 0;
  for (const Step& s : p.steps) want_relayout += s.relayout_seconds;
  EXPECT_GT(want_relayout, 0);
  EXPECT_NEAR(relayout, want_relayout, 1e-15);
}

}  // namespace
}  // namespace tessera::compiler
