// Phase 6's local gate of every decode step (phase6_steps.h).
#include "phase6_steps.h"

#include <fmt/format.h>

#include "diagnose_run.h"
#include "tessera/core/error.h"
#include "tessera/oracle/rope.h"

namespace tessera::pipeline::detail {

namespace {

std::string cache_name(const char* kv, int64_t layer, bool host) {
  return fmt::format("{}L{}.{}{}", host ? "host:" : "", layer, kv, host ? "_in" : "");
}

const std::vector<float>& kept(const runtime::Values& npu, const std::string& name) {
  auto it = npu.find(name);
  if (it == npu.end())
    throw_error<InternalError>("phase 6: the session did not keep {} (the decode-step gate needs every K / V "
                               "cache it wrote)", name);
  return it->second;
}

}  // namespace

DecodeStepGate::DecodeStepGate(Context& ctx, const runtime::Session& prefilled, int64_t prompt_rows)
    : ctx_(ctx), prompt_(prompt_rows) {
  const auto n = static_cast<size_t>(prompt_rows * ctx.config.kv_dim());
  for (int64_t l = 0; l < ctx.config.num_layers; ++l)
    for (auto* rec : {&k_, &v_}) {
      const std::string name = cache_name(rec == &k_ ? "k_cache" : "v_cache", l, false);
      const std::vector<float>& all = kept(prefilled.last_values(), name);
      TESSERA_CHECK(all.size() >= n, "phase 6: the prefill's {} has {} values, fewer than {} rows", name,
                    all.size(), prompt_rows);
      rec->emplace_back(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
    }
}

// What an honest session feeds decode step `token` at `position`: the RoPE
// row of that position and the recorded caches with room up to `rows` (the
// call's T; a zeroed row where the call writes).
runtime::Values DecodeStepGate::step_inputs(int32_t token, int64_t position, int64_t rows) const {
  runtime::Values in;
  in["host:token_ids"] = {static_cast<float>(token)};
  oracle::RopeTable rope = oracle::rope_table(ctx_.config, position, 1);
  in["host:rope_cos"] = std::move(rope.cos);
  in["host:rope_sin"] = std::move(rope.sin);
  const auto n = static_cast<size_t>(rows * ctx_.config.kv_dim());
  for (int64_t l = 0; l < ctx_.config.num_layers; ++l)
    for (const auto* rec : {&k_, &v_}) {
      std::vector<float> cache = (*rec)[static_cast<size_t>(l)];
      cache.resize(n, 0.0f);
      in[cache_name(rec == &k_ ? "k_cache" : "v_cache", l, true)] = std::move(cache);
    }
  return in;
}

void DecodeStepGate::record(const runtime::Values& npu, int64_t row) {
  const int64_t d = ctx_.config.kv_dim();
  for (int64_t l = 0; l < ctx_.config.num_layers; ++l)
    for (auto* rec : {&k_, &v_}) {
      const std::string name = cache_name(rec == &k_ ? "k_cache" : "v_cache", l, false);
      const std::vector<float>& all = kept(npu, name);
      TESSERA_CHECK(static_cast<int64_t>(all.size()) >= (row + 1) * d, "phase 6: {} has no row {}", name, row);
      auto& r = (*rec)[static_cast<size_t>(l)];
      r.insert(r.end(), all.begin() + row * d, all.begin() + (row + 1) * d);
    }
}

void DecodeStepGate::check(const runtime::Session& s, size_t step, int32_t token, PhaseResult& r) {
  const compiler::Graph& g = s.last_plan().graph;
  const int64_t P = prompt_ + static_cast<int64_t>(step);
  const std::string name = fmt::format("decode step {} ", step);
  bool failed = false;
  if (g.past != P || g.seq != 1) {
    GateCheck c;
    c.name = name + "position";
    c.message = fmt::format("the session ran decode step {} as a call of {} token(s) at position {}; the "
                            "oracle's step {} is one token at position {}", step, g.seq, g.past, step, P);
    r.checks.push_back(std::move(c));
    failed = true;
  } else {
    ++passed_;
  }
  const runtime::Values host = step_inputs(token, P, g.past + g.seq);
  for (const LocalCheck& c : local_checks_on(ctx_, g, s.last_values(), host, -1, &weights_)) {
    GateCheck gc = make_check(name + "local " + c.value, c.metrics, c.threshold);
    if (gc.passed) {
      ++passed_;
      continue;
    }
    failed = true;
    r.checks.push_back(std::move(gc));
  }
  if (failed) {
    ++failed_;
    if (!diagnosis_) {
      compiler::Graph at = g;
      at.past = P;  // RoPE hypotheses are offsets from the oracle's position
      try {
        diagnosis_ = diagnose_run(ctx_, at, s.last_values(), host, fmt::format("phase 6 decode step {}", step));
      } catch (const Error& e) {  // advice only: the failed checks stand
        ctx_.issues.push_back(fmt::format("diagnosis of phase 6 decode step {} not run: {}", step, e.what()));
      }
    }
  }
  record(s.last_values(), g.past);
}

}  // namespace tessera::pipeline::detail
