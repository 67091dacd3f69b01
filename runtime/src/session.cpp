#include "tessera/core/mutants.h"
#include "tessera/runtime/session.h"

#include <algorithm>
#include <bit>
#include <chrono>

#include <fmt/format.h>

#include "tessera/compiler/retarget.h"
#include "tessera/core/threads.h"
#include "tessera/oracle/rope.h"

namespace tessera::runtime {

using compiler::ValueKind;
using compiler::ValueRef;

BucketPolicy parse_bucket_policy(std::string_view name) {
  if (name == "exact") return BucketPolicy::exact;
  if (name == "pow2") return BucketPolicy::pow2;
  throw_error<UsageError>("unknown bucket policy '{}' (known: exact, pow2)", name);
}

const char* bucket_policy_name(BucketPolicy p) {
  return p == BucketPolicy::exact ? "exact" : "pow2";
}

int64_t bucket_length(BucketPolicy policy, int64_t n, int64_t context) {
  if (n < 1 || n > context)
    throw_error<UsageError>("bucket: a prompt of {} tokens does not fit {} positions", n, context);
  if (policy == BucketPolicy::exact) return n;
  int64_t b = 16;  // below 16 tokens a bucket per length would compile many tiny shapes
  while (b < n) b *= 2;
  return std::min(b, context);
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::eos: return "eos";
    case StopReason::max_tokens: return "max_tokens";
    case StopReason::context_full: return "context_full";
    case StopReason::callback: return "callback";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double mean_over(const std::vector<CallTiming>& calls, F field) {
  double s = 0;
  for (const CallTiming& c : calls) s += field(c);
  return calls.empty() ? 0.0 : s / static_cast<double>(calls.size());
}

std::string layer_value(const char* name, int64_t layer, ValueKind kind = ValueKind::activation) {
  return ValueRef{kind, name, static_cast<int>(layer), false}.str();
}

}  // namespace

double GenerateResult::decode_predicted_seconds_per_token() const {
  return mean_over(decode, [](const CallTiming& c) { return c.predicted_seconds; });
}
double GenerateResult::decode_host_seconds_per_token() const {
  return mean_over(decode, [](const CallTiming& c) { return c.host_seconds; });
}

Session::Session(const model::ModelConfig& config,
                 std::shared_ptr<compiler::PackedWeights> weights, const npu::DeviceSpec& spec,
                 SessionOptions opts)
    : config_(config), weights_(std::move(weights)), spec_(spec), opts_(std::move(opts)) {
  config_.validate();
  if (weights_ == nullptr) throw_error<UsageError>("session {}: no packed weights", config_.name);
  if (opts_.context < 0)
    throw_error<UsageError>("session {}: context {} must be >= 0 (0: the model's maximum, capped "
                            "at 4096)", config_.name, opts_.context);
  context_ = opts_.context > 0 ? opts_.context : config_.default_context();
  config_.check_context(context_);
  cache_ = std::make_unique<compiler::DesignCache>(spec_);
  if (opts_.tile_choices) cache_->use_tile_choices(opts_.tile_choices);
  exec_ = std::make_unique<Executor>(spec_, *weights_);
  exec_->set_append_only(true);  // the cache only grows, until reset()
  const auto n = static_cast<size_t>(config_.num_layers);
  k_cache_.assign(n, {});
  v_cache_.assign(n, {});
  // Fail at construction, not at the first decode, when the weights were
  // packed for other plans (another model, spec or style).
  decode_plan_ = std::make_shared<compiler::Plan>(lower_plan(1, 0));
  decode_bucket_ = std::bit_width(1u);
  weights_->check_covers({decode_plan_.get()});
  if (opts_.resident_decode_bytes > 0) weights_->keep_resident(*decode_plan_, opts_.resident_decode_bytes);
}

compiler::Plan Session::lower_plan(int64_t seq, int64_t past) {
  compiler::PlanOptions po;
  po.style = opts_.style;
  po.context = context_;
  po.host = opts_.host;
  po.passes = seq == 1 ? opts_.decode_passes : opts_.prefill_passes;
  return compiler::lower(config_, seq, past, *cache_, po);
}

// Decode plans are lowered once per bucket of cache lengths T = P + 1 (powers
// of two) and retargeted to each position inside it: only the attention and
// kv_append launches change between positions, and the pass pipeline's
// greedy trials cost as much host time as simulating the token.
// In place: a copy of the plan per token (every launch's timing, channels
// and names) cost as much host time as the retarget itself.
const compiler::Plan& Session::decode_plan(int64_t past) {
  const int bucket = std::bit_width(static_cast<uint64_t>(past + 1));
  if (decode_plan_ == nullptr || bucket != decode_bucket_) {
    decode_plan_.reset();
    std::optional<compiler::Plan> ready = take_next_decode(past);
    decode_plan_ = std::make_shared<compiler::Plan>(ready ? std::move(*ready) : lower_plan(1, past));
    decode_bucket_ = bucket;
    return *decode_plan_;
  }
  if (decode_plan_->past == past) return *decode_plan_;
  try {
    compiler::retarget_in_place(*decode_plan_, config_, past, *cache_);
  } catch (...) {
    // Part-way: lowered afresh by the next call, and no longer the last call's.
    if (last_plan_ == decode_plan_) last_plan_.reset();
    decode_plan_.reset();
    throw;
  }
  return *decode_plan_;
}

// A prompt's simulation leaves the pool's worker idle most of its time (a
// SmolLM2 prompt of 15 tokens: a third of it busy), and the first decode
// token after it would lower its bucket's plan first (20-30 ms): that plan
// is lowered beside the prompt instead, on a thread of its own, its parallel
// loops inline so as not to take the worker from the prompt. Used only when
// the next decode is at exactly `past`, so the plan is the one decode_plan()
// would lower itself.
void Session::start_next_decode(int64_t past) {
  const int bucket = std::bit_width(static_cast<uint64_t>(past + 1));
  if (past >= context_ || (decode_plan_ != nullptr && bucket == decode_bucket_)) return;
  if (next_decode_.valid() && next_decode_past_ == past) return;
  next_decode_past_ = past;
  next_decode_ = std::async(std::launch::async, [this, past] {
    InlineOnThisThread solo;
    return lower_plan(1, past);
  });
}

std::optional<compiler::Plan> Session::take_next_decode(int64_t past) {
  if (!next_decode_.valid()) return std::nullopt;
  std::future<compiler::Plan> f = std::move(next_decode_);
  if (next_decode_past_ == past) return f.get();  // its error is the one lower_plan() would throw here
  try {
    f.get();  // lowered for another position: waited for, dropped
  } catch (...) {
  }
  return std::nullopt;
}

const compiler::Plan& Session::last_plan() const {
  if (last_plan_ == nullptr)
    throw_error<UsageError>("session {}: no call has completed, so there is no last plan", config_.name);
  return *last_plan_;
}

void Session::reset() {
  position_ = 0;
  exec_->forget_resident();
  for (auto& k : k_cache_) k.clear();
  for (auto& v : v_cache_) v.clear();
  last_values_.clear();
}

void Session::check_tokens(std::span<const int32_t> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size)
      throw_error<InputError>("session {}: token {} has id {} outside the vocabulary [0, {})",
                              config_.name, i, tokens[i], config_.vocab_size);
}

void Session::check_room(int64_t n, const char* what) const {
  if (position_ + n > context_)
    throw_error<ContextFullError>("context full: {} of {} tokens at position {} needs {} "
                                  "positions, the KV cache holds {}", what, n, position_,
                                  position_ + n, context_);
}

std::vector<float> Session::prefill(std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw_error<UsageError>("session {}: prefill of an empty prompt", config_.name);
  check_tokens(tokens);
  check_room(n, "a prompt");
  const int64_t S = bucket_length(opts_.bucket, n, context_ - position_);
  std::vector<int32_t> padded(tokens.begin(), tokens.end());
  padded.resize(static_cast<size_t>(S), 0);  // pad rows: token 0, after the real ones
  return forward(padded, n);
}

std::vector<float> Session::decode(int32_t token) {
  check_tokens(std::span<const int32_t>(&token, 1));
  check_room(1, "a decode step");
  return forward(std::span<const int32_t>(&token, 1), 1);
}

Values Session::forward_inputs(std::span<const int32_t> tokens) {
  const auto S = static_cast<int64_t>(tokens.size());
  const int64_t P = position_, kvd = config_.kv_dim();
  Values in;
  in["host:token_ids"] = std::vector<float>(tokens.begin(), tokens.end());
  oracle::RopeTable rope = oracle::rope_table(config_, P + (mutant_on(Mutant::session_decode_rope_next_pos) && S == 1 && P > 0 ? 1 : 0), S);
  in["host:rope_cos"] = std::move(rope.cos);
  in["host:rope_sin"] = std::move(rope.sin);
  if (mutant_on(Mutant::session_rope_truncate))
    for (const char* t : {"host:rope_cos", "host:rope_sin"}) for (float& v : in[t]) v = truncate_bf16(v);
  // [P + S, kv_dim]: the cached rows, then zeroed room for this call's rows.
  // The session's own vectors are lent to the call (moved, not copied: a copy
  // per token grows with the context); give_back_caches returns them.
  for (int64_t l = 0; l < config_.num_layers; ++l)
    for (auto* src : {&k_cache_, &v_cache_}) {
      auto& cache = (*src)[static_cast<size_t>(l)];
      cache.resize(static_cast<size_t>((P + S) * kvd), 0.0f);
      in[layer_value(src == &k_cache_ ? "k_cache_in" : "v_cache_in", l, ValueKind::host)] =
          std::move(cache);
    }
  return in;
}

void Session::give_back_caches(Values& in) {
  const int64_t kvd = config_.kv_dim();
  for (int64_t l = 0; l < config_.num_layers; ++l)
    for (auto* dst : {&k_cache_, &v_cache_}) {
      auto it = in.find(layer_value(dst == &k_cache_ ? "k_cache_in" : "v_cache_in", l, ValueKind::host));
      auto& cache = (*dst)[static_cast<size_t>(l)];
      if (it != in.end()) cache = std::move(it->second);
      cache.resize(static_cast<size_t>(position_ * kvd));  // the call's room dropped until it lands
    }
}

std::vector<float> Session::forward(std::span<const int32_t> tokens, int64_t real) {
  const auto t0 = Clock::now();
  const auto S = static_cast<int64_t>(tokens.size());
  const int64_t P = position_, kvd = config_.kv_dim();
  // A decode token runs the session's own decode plan (no copy); a prefill its own.
  std::shared_ptr<const compiler::Plan> owned;
  if (S == 1) decode_plan(P);
  else owned = std::make_shared<const compiler::Plan>(lower_plan(S, P));
  if (S > 1) start_next_decode(P + real);
  const double plan_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::shared_ptr<const compiler::Plan> plan_ptr = S == 1 ? decode_plan_ : owned;
  const compiler::Plan& plan = *plan_ptr;
  weights_->check_covers({&plan});  // InputError naming a missing layout
  std::set<std::string> keep = opts_.keep;
  keep.insert("logits");
  // Only the real rows enter the session cache: pad rows' K/V (positions
  // >= P + real) are garbage for later calls. Those rows alone come back,
  // unless the caller keeps the whole cache.
  const int64_t from = mutant_on(Mutant::session_kv_stale_row) && P > 0 ? P - 1 : P;
  std::map<std::string, KeepRows> keep_rows;
  for (int64_t l = 0; l < config_.num_layers; ++l)
    for (const char* cache : {"k_cache", "v_cache"}) {
      const std::string name = layer_value(cache, l);
      const int64_t first = l + 1 == config_.num_layers ? from : P;
      if (opts_.keep.count(name)) keep.insert(name);
      else keep_rows[name] = KeepRows{first, real, kvd};
    }
  Values in = forward_inputs(tokens);
  struct GiveBack {  // on exceptions too: the cache must not be left in `in`
    Session& s;
    Values& in;
    ~GiveBack() { s.give_back_caches(in); }
  };
  ExecResult res;
  {
    GiveBack give_back{*this, in};
    res = exec_->run(plan, in, &keep, {}, real - 1, &keep_rows);
  }
  for (int64_t l = 0; l < config_.num_layers; ++l)
    for (auto* dst : {&k_cache_, &v_cache_}) {
      const std::string name = layer_value(dst == &k_cache_ ? "k_cache" : "v_cache", l);
      const std::vector<float>& rows = res.values.at(name);
      auto& cache = (*dst)[static_cast<size_t>(l)];
      cache.resize(static_cast<size_t>((P + real) * kvd));
      const int64_t first = keep_rows.count(name) ? 0 : l + 1 == config_.num_layers ? from : P;
      std::copy(rows.begin() + first * kvd, rows.begin() + (first + real) * kvd, cache.begin() + P * kvd);
      if (!opts_.keep.count(name)) res.values.erase(name);
    }
  std::vector<float> logits = res.values.at("logits");
  // session_stuck_pos: the first decode step (a call of one token after a prefill) does not advance.
  if (!(mutant_on(Mutant::session_stuck_pos) && real == 1 && P > 0 && !stuck_once_)) position_ += real;
  else stuck_once_ = true;
  last_values_ = std::move(res.values);
  last_plan_ = plan_ptr;
  last_timing_ = CallTiming{real, S, res.predicted_seconds,
                            std::chrono::duration<double>(Clock::now() - t0).count(), plan_seconds, {}};
  if (opts_.profile) last_timing_.steps = std::move(res.steps);
  return logits;
}

GenerateResult Session::generate(std::span<const int32_t> prompt, const GenerateOptions& opts) {
  if (opts.max_new_tokens < 0)
    throw_error<UsageError>("generate: max_new_tokens {} must be >= 0", opts.max_new_tokens);
  Sampler sampler(opts.sampling);
  std::vector<int64_t> stops(opts.stop_tokens.begin(), opts.stop_tokens.end());
  if (stops.empty()) stops = config_.eos_token_ids;
  GenerateResult r;
  std::vector<float> logits = prefill(prompt);
  r.prefill = last_timing_;
  while (true) {
    if (static_cast<int64_t>(r.tokens.size()) >= opts.max_new_tokens) {
      r.stop = StopReason::max_tokens;
      r.stop_message = fmt::format("max tokens: {}", opts.max_new_tokens);
      break;
    }
    const int32_t tok = sampler.sample(logits);
    r.tokens.push_back(tok);
    const bool go_on = !opts.on_token || opts.on_token(tok);
    if (std::find(stops.begin(), stops.end(), tok) != stops.end()) {
      r.stop = StopReason::eos;
      r.stop_message = fmt::format("stop token {}", tok);
      break;
    }
    if (!go_on) {
      r.stop = StopReason::callback;
      r.stop_message = "stopped by the token callback";
      break;
    }
    if (static_cast<int64_t>(r.tokens.size()) >= opts.max_new_tokens) continue;
    if (position_ >= context_) {  // the next decode would not fit: stop, do not throw
      r.stop = StopReason::context_full;
      r.stop_message = fmt::format("context full: {} positions", context_);
      break;
    }
    logits = decode(tok);
    r.decode.push_back(last_timing_);
  }
  return r;
}

}  // namespace tessera::runtime
