#pragma once
// Shared by the runtime tests: a tiny synthetic model (weights on disk, loaded
// back as a user's model would be), its packed weights for the plans the tests
// run, and small helpers (oracle greedy, error metrics).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "tessera/compiler/packed_weights.h"
#include "tessera/compiler/plan.h"
#include "tessera/model/config.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/synth.h"
#include "tessera/npu/device_spec.h"
#include "tessera/oracle/oracle.h"
#include "tessera/oracle/rope.h"
#include "tessera/runtime/executor.h"
#include "tessera/runtime/sampler.h"
#include "tessera/runtime/session.h"

namespace tessera::runtime::testing {

// bf16 unit roundoff (core/bf16.h): the unit every tolerance here is built from.
inline constexpr double kU = 1.0 / 256.0;

struct TinyModel {
  model::ModelConfig config;
  model::Weights weights;
  npu::DeviceSpec spec;
  std::shared_ptr<compiler::DesignCache> cache;
  std::shared_ptr<compiler::PackedWeights> packed;  // default + per-op styles, prefill + decode
};

inline compiler::Plan lower_plan(const TinyModel& m, int64_t seq, int64_t past,
                                 compiler::PlanStyle style = compiler::PlanStyle::standard) {
  compiler::PlanOptions o;
  o.style = style;
  return compiler::lower(m.config, seq, past, *m.cache, o);
}

inline TinyModel load_tiny(const std::string& preset) {
  // ctest runs every test in its own process, in parallel: one directory per
  // process, or one test reads a model another is still writing.
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("runtime-" + preset + "-" + std::to_string(::getpid()));
  model::write_synthetic_model(model::preset(preset), dir, 11);
  model::ModelDir md = model::load_model_dir(dir);
  std::filesystem::remove_all(dir);
  TinyModel m{md.config, md.weights, npu::DeviceSpec::preset("xdna2"), nullptr, nullptr};
  m.cache = std::make_shared<compiler::DesignCache>(m.spec);
  // The prefill W layout does not depend on M (plan.h) and decode linears use
  // the GEMV layout at any P, so one prefill and one decode plan per style
  // cover every bucket and position the tests run.
  std::vector<compiler::Plan> plans;
  for (auto style : {compiler::PlanStyle::standard, compiler::PlanStyle::per_op}) {
    plans.push_back(lower_plan(m, 5, 0, style));
    plans.push_back(lower_plan(m, 1, 5, style));
  }
  std::vector<const compiler::Plan*> ptrs;
  for (const auto& p : plans) ptrs.push_back(&p);
  m.packed = std::make_shared<compiler::PackedWeights>(
      compiler::pack_weights(ptrs, m.config, m.weights));
  return m;
}

// One per preset and process.
inline const TinyModel& tiny(const std::string& preset) {
  static std::map<std::string, std::unique_ptr<TinyModel>> models;
  auto& slot = models[preset];
  if (!slot) slot = std::make_unique<TinyModel>(load_tiny(preset));
  return *slot;
}

// Host inputs for `tokens` at positions P.. with the given caches ([P, kv_dim]
// per layer; empty for P = 0).
inline Values host_inputs(const TinyModel& m, const std::vector<int32_t>& tokens, int64_t P,
                   const std::vector<std::vector<float>>& k = {},
                   const std::vector<std::vector<float>>& v = {}) {
  const auto S = static_cast<int64_t>(tokens.size());
  const int64_t kvd = m.config.kv_dim();
  Values in;
  in["host:token_ids"] = std::vector<float>(tokens.begin(), tokens.end());
  const oracle::RopeTable rope = oracle::rope_table(m.config, P, S);
  in["host:rope_cos"] = rope.cos;
  in["host:rope_sin"] = rope.sin;
  for (int l = 0; l < m.config.num_layers; ++l)
    for (const char* name : {"k_cache_in", "v_cache_in"}) {
      std::vector<float> buf(static_cast<size_t>((P + S) * kvd), 0.0f);
      const auto& src = name[0] == 'k' ? k : v;
      if (P > 0) std::copy(src[l].begin(), src[l].begin() + P * kvd, buf.begin());
      in[compiler::ValueRef{compiler::ValueKind::host, name, l, false}.str()] = std::move(buf);
    }
  return in;
}

inline std::vector<int32_t> prompt_tokens(int64_t n, int64_t vocab, uint32_t salt = 0) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i)
    t.push_back(static_cast<int32_t>((i * 37 + 11 + salt * 101) % (vocab - 2)));
  return t;
}

struct Diff {
  double cosine = 0;
  double max_rel = 0;  // max |a - b| / max |ref|: normwise, stable where ref ~ 0
  double max_abs = 0;
};

inline Diff diff(const std::vector<float>& ref, const std::vector<float>& got) {
  EXPECT_EQ(ref.size(), got.size());
  double dot = 0, nr = 0, ng = 0, amax = 0, rmax = 0;
  for (size_t i = 0; i < std::min(ref.size(), got.size()); ++i) {
    dot += double{ref[i]} * got[i];
    nr += double{ref[i]} * ref[i];
    ng += double{got[i]} * got[i];
    amax = std::max(amax, std::fabs(double{ref[i]} - got[i]));
    rmax = std::max(rmax, std::fabs(double{ref[i]}));
  }
  Diff d;
  d.cosine = nr > 0 && ng > 0 ? dot / std::sqrt(nr * ng) : (nr == ng ? 1.0 : 0.0);
  d.max_abs = amax;
  d.max_rel = rmax > 0 ? amax / rmax : amax;
  return d;
}

inline std::vector<float> tensor_values(const Tensor& t) {
  auto s = t.as<float>();
  return std::vector<float>(s.begin(), s.end());
}

inline Session make_session(const TinyModel& m, SessionOptions o = {}) {
  return Session(m.config, m.packed, m.spec, std::move(o));
}

// A stop list no token matches: the tests want exactly n new tokens.
inline GenerateOptions greedy(int64_t n) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.stop_tokens = {-1};
  return g;
}

struct OracleStep {
  int32_t token;
  float gap;    // top-1 minus top-2 logit
  float scale;  // max |logit|
};

// The oracle's greedy continuation (FP32), with the margin of each pick.
inline std::vector<OracleStep> oracle_greedy(const TinyModel& m,
                                             const std::vector<int32_t>& prompt, int n) {
  const oracle::Oracle orc(m.config, m.weights);
  oracle::KvCache cache = orc.new_cache();
  std::vector<float> logits = tensor_values(orc.forward(prompt, cache));
  std::vector<OracleStep> out;
  for (int i = 0; i < n; ++i) {
    const int32_t best = argmax(logits);
    float second = -INFINITY, scale = 0;
    for (size_t v = 0; v < logits.size(); ++v) {
      if (static_cast<int32_t>(v) != best) second = std::max(second, logits[v]);
      scale = std::max(scale, std::fabs(logits[v]));
    }
    out.push_back({best, logits[static_cast<size_t>(best)] - second, scale});
    const std::vector<int32_t> one = {best};
    logits = tensor_values(orc.forward(one, cache));
  }
  return out;
}

// ChatML without a default system message (Qwen2.5's shape).
inline const char* const kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// The tiny preset's synthetic tokenizer, written to a per-process directory
// (parallel ctest runs share TempDir) and loaded back.
inline model::Tokenizer tiny_tokenizer(const model::ModelConfig& c) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("tiny-tok-" + std::to_string(::getpid()));
  model::write_synthetic_model(model::preset("tiny"), dir, 11);
  auto tok = model::load_tokenizer(dir, c);
  std::filesystem::remove_all(dir);
  return tok;
}

}  // namespace tessera::runtime::testing
