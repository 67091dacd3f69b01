#include "tessera/oracle/oracle.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "tessera/core/error.h"
#include "tessera/oracle/ops.h"
#include "tessera/oracle/rope.h"

namespace tessera::oracle {

using model::WeightRole;

KvCache::KvCache(int64_t num_layers, int64_t kv_dim)
    : kv_dim_(kv_dim), k_(static_cast<size_t>(num_layers)), v_(static_cast<size_t>(num_layers)) {}

void KvCache::clear() {
  for (auto& k : k_) k.clear();
  for (auto& v : v_) v.clear();
  length_ = 0;
}

size_t KvCache::bytes() const {
  size_t n = 0;
  for (size_t l = 0; l < k_.size(); ++l) n += (k_[l].size() + v_[l].size()) * sizeof(float);
  return n;
}

// Activations of one forward call; every buffer is row-major [rows, width].
struct Oracle::Scratch {
  int64_t rows = 0;
  int64_t first_pos = 0;
  RopeTable rope;
  std::vector<float> x, norm, q, k, v, attn, o, gate, up, act, down;
};

// Sends wanted intermediates to the Taps; a no-op for the fast path.
class Oracle::Recorder {
 public:
  explicit Recorder(const ForwardRequest& r) : req_(r) {
    active_ = r.want != nullptr && !r.want->empty();
    TESSERA_CHECK(!active_ || r.taps != nullptr, "taps requested without a Taps to fill");
  }
  bool active() const { return active_; }
  void operator()(int layer, const char* name, const std::vector<float>& buf, int64_t rows,
                  int64_t width) const {
    if (active_ && req_.want->wants(layer, name))
      req_.taps->record(layer, name, buf.data(), rows, width);
  }

 private:
  const ForwardRequest& req_;
  bool active_ = false;
};

Tensor Oracle::f32(const model::Weights& w, WeightRole role, int layer) {
  const Tensor& t = w.get(cfg_, role, layer);
  if (t.dtype() == DType::f32) return t;  // a view sharing the mapping
  Tensor c = t.to(DType::f32);
  converted_bytes_ += c.nbytes();
  return c;
}

Tensor Oracle::matrix(const model::Weights& w, WeightRole role, int layer) {
  return w.get(cfg_, role, layer);  // a view: linear() widens a block of rows at a time
}

Oracle::Oracle(model::ModelConfig config, const model::Weights& weights)
    : cfg_(std::move(config)) {
  cfg_.validate();
  weights.check_against(cfg_);
  inv_freq_ = rope_inv_freq(cfg_);
  embed_ = matrix(weights, WeightRole::embed_tokens, -1);
  final_norm_ = f32(weights, WeightRole::final_norm, -1);
  lm_head_ = cfg_.tie_word_embeddings ? embed_ : matrix(weights, WeightRole::lm_head, -1);
  for (int l = 0; l < static_cast<int>(cfg_.num_layers); ++l) {
    Layer L;
    L.attn_norm = f32(weights, WeightRole::attn_norm, l);
    L.wq = matrix(weights, WeightRole::q_proj, l);  // (q_dim, hidden)
    L.wk = matrix(weights, WeightRole::k_proj, l);  // (kv_dim, hidden)
    L.wv = matrix(weights, WeightRole::v_proj, l);  // (kv_dim, hidden)
    if (cfg_.qkv_bias) {
      L.bq = f32(weights, WeightRole::q_bias, l);
      L.bk = f32(weights, WeightRole::k_bias, l);
      L.bv = f32(weights, WeightRole::v_bias, l);
    }
    if (cfg_.qk_norm) {
      L.q_norm = f32(weights, WeightRole::q_norm, l);  // (head_dim)
      L.k_norm = f32(weights, WeightRole::k_norm, l);
    }
    L.wo = matrix(weights, WeightRole::o_proj, l);  // (hidden, q_dim)
    L.ffn_norm = f32(weights, WeightRole::ffn_norm, l);
    L.w_gate = matrix(weights, WeightRole::gate_proj, l);  // (intermediate, hidden)
    L.w_up = matrix(weights, WeightRole::up_proj, l);      // (intermediate, hidden)
    L.w_down = matrix(weights, WeightRole::down_proj, l);  // (hidden, intermediate)
    layers_.push_back(std::move(L));
  }
}

KvCache Oracle::new_cache() const { return KvCache(cfg_.num_layers, cfg_.kv_dim()); }

namespace {
const float* data_or_null(const Tensor& t) { return t.empty() ? nullptr : t.as<float>().data(); }
const float* data(const Tensor& t) { return t.as<float>().data(); }
std::vector<float> buffer(int64_t rows, int64_t width) {
  return std::vector<float>(static_cast<size_t>(rows * width));
}
}  // namespace

void Oracle::attention_block(int layer, Scratch& s, KvCache& cache, const Recorder& rec) const {
  const Layer& L = layers_[static_cast<size_t>(layer)];
  const int64_t H = cfg_.hidden_size, T = s.rows, D = cfg_.head_dim;
  const int64_t qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
  rms_norm(s.x.data(), T, H, data(L.attn_norm), cfg_.rms_norm_eps, s.norm.data());
  rec(layer, "attn_norm", s.norm, T, H);
  linear(s.norm.data(), T, H, L.wq, qd, data_or_null(L.bq), s.q.data());
  linear(s.norm.data(), T, H, L.wk, kvd, data_or_null(L.bk), s.k.data());
  linear(s.norm.data(), T, H, L.wv, kvd, data_or_null(L.bv), s.v.data());
  rec(layer, "q", s.q, T, qd);
  rec(layer, "k", s.k, T, kvd);
  rec(layer, "v", s.v, T, kvd);
  if (cfg_.qk_norm) {  // per-head RMSNorm over head_dim, before RoPE (Qwen3)
    rms_norm(s.q.data(), T * cfg_.num_heads, D, data(L.q_norm), cfg_.rms_norm_eps, s.q.data());
    rms_norm(s.k.data(), T * cfg_.num_kv_heads, D, data(L.k_norm), cfg_.rms_norm_eps,
             s.k.data());
    rec(layer, "q_norm", s.q, T, qd);
    rec(layer, "k_norm", s.k, T, kvd);
  }
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = s.first_pos + t;
    apply_rope(s.q.data() + t * qd, cfg_.num_heads, D, s.rope.cos_row(pos), s.rope.sin_row(pos));
    apply_rope(s.k.data() + t * kvd, cfg_.num_kv_heads, D, s.rope.cos_row(pos),
               s.rope.sin_row(pos));
  }
  rec(layer, "q_rot", s.q, T, qd);
  rec(layer, "k_rot", s.k, T, kvd);
  auto& keys = cache.k_[static_cast<size_t>(layer)];
  auto& values = cache.v_[static_cast<size_t>(layer)];
  keys.insert(keys.end(), s.k.begin(), s.k.end());
  values.insert(values.end(), s.v.begin(), s.v.end());
  const AttentionShape shape{T, s.first_pos, cfg_.num_heads, cfg_.num_kv_heads, D};
  causal_attention(shape, s.q.data(), keys.data(), values.data(), s.attn.data());
  rec(layer, "attn_out", s.attn, T, qd);
  linear(s.attn.data(), T, qd, L.wo, H, nullptr, s.o.data());
  rec(layer, "o", s.o, T, H);
  for (size_t i = 0; i < s.x.size(); ++i) s.x[i] += s.o[i];
  rec(layer, "h_mid", s.x, T, H);
}

void Oracle::mlp_block(int layer, Scratch& s, const Recorder& rec) const {
  const Layer& L = layers_[static_cast<size_t>(layer)];
  const int64_t H = cfg_.hidden_size, T = s.rows, I = cfg_.intermediate_size;
  rms_norm(s.x.data(), T, H, data(L.ffn_norm), cfg_.rms_norm_eps, s.norm.data());
  rec(layer, "ffn_norm", s.norm, T, H);
  linear(s.norm.data(), T, H, L.w_gate, I, nullptr, s.gate.data());
  linear(s.norm.data(), T, H, L.w_up, I, nullptr, s.up.data());
  rec(layer, "gate", s.gate, T, I);
  rec(layer, "up", s.up, T, I);
  swiglu(s.gate.data(), s.up.data(), T * I, s.act.data());
  rec(layer, "act", s.act, T, I);
  linear(s.act.data(), T, I, L.w_down, H, nullptr, s.down.data());
  rec(layer, "down", s.down, T, H);
  for (size_t i = 0; i < s.x.size(); ++i) s.x[i] += s.down[i];
  rec(layer, "h_out", s.x, T, H);
}

Tensor Oracle::lm_head(Scratch& s, LogitsMode mode, const Recorder& rec) const {
  const int64_t H = cfg_.hidden_size, T = s.rows, V = cfg_.vocab_size;
  rms_norm(s.x.data(), T, H, data(final_norm_), cfg_.rms_norm_eps, s.norm.data());
  rec(kModelLayer, "final_norm", s.norm, T, H);
  const int64_t first = mode == LogitsMode::last ? T - 1 : 0;
  const int64_t rows = T - first;
  Tensor logits(DType::f32, {rows, V});
  float* out = logits.as_mut<float>().data();
  linear(s.norm.data() + first * H, rows, H, lm_head_, V, nullptr, out);
  if (rec.active()) {
    std::vector<float> copy(out, out + rows * V);
    rec(kModelLayer, "logits", copy, rows, V);
  }
  return logits;
}

size_t Oracle::forward_bytes(int64_t tokens, int64_t past, bool taps) const {
  const auto T = static_cast<double>(tokens), keys = static_cast<double>(past + tokens);
  const auto H = static_cast<double>(cfg_.hidden_size), I = static_cast<double>(cfg_.intermediate_size);
  const auto qd = static_cast<double>(cfg_.q_dim()), kvd = static_cast<double>(cfg_.kv_dim());
  const double per_row = 4 * H + 2 * qd + 2 * kvd + 3 * I;  // Scratch buffers
  double floats = T * per_row + T * keys                     // + attention scores
                  + 2 * static_cast<double>(cfg_.num_layers) * T * kvd  // + KV cache growth
                  + T * static_cast<double>(cfg_.vocab_size);           // + logits (all rows at most)
  if (taps) floats += static_cast<double>(cfg_.num_layers) * T * per_row;
  return static_cast<size_t>(std::min(floats * sizeof(float), 1e19));
}

namespace {

size_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : SIZE_MAX;
}

}  // namespace

Tensor Oracle::forward(std::span<const int32_t> tokens, KvCache& cache,
                       const ForwardRequest& req) const {
  if (tokens.empty()) throw_error<InputError>("{}: forward called with no tokens", cfg_.name);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg_.vocab_size)
      throw_error<InputError>("{}: token {} at index {} is outside the vocabulary [0, {})",
                              cfg_.name, tokens[i], i, cfg_.vocab_size);
  TESSERA_CHECK(cache.num_layers() == cfg_.num_layers && cache.kv_dim() == cfg_.kv_dim(),
                "KV cache of {} layers x {} does not fit {}", cache.num_layers(),
                cache.kv_dim(), cfg_.name);
  const auto n = static_cast<int64_t>(tokens.size());
  if (cache.length() + n > cfg_.max_position_embeddings)
    throw_error<LimitError>("{}: context full: {} tokens at position {} need {} positions, the model has "
                            "max_position_embeddings {}", cfg_.name, n, cache.length(), cache.length() + n,
                            cfg_.max_position_embeddings);
  // Checked before anything is allocated: a long prompt is refused, not an OOM kill.
  const size_t need = forward_bytes(n, cache.length(), req.want != nullptr && !req.want->empty());
  if (need > physical_memory_bytes())
    throw_error<LimitError>("{}: a forward of {} tokens at position {} needs {:.1f} GB of activations, more "
                            "than this machine's {:.1f} GB of memory: use a shorter prompt", cfg_.name, n,
                            cache.length(), static_cast<double>(need) / 1e9,
                            static_cast<double>(physical_memory_bytes()) / 1e9);
  const Recorder rec(req);
  const int64_t T = static_cast<int64_t>(tokens.size()), H = cfg_.hidden_size;
  const int64_t I = cfg_.intermediate_size, qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
  Scratch s;
  s.rows = T;
  s.first_pos = cache.length();
  s.rope = rope_table(inv_freq_, s.first_pos, T);
  s.x = buffer(T, H);
  s.norm = buffer(T, H);
  s.q = buffer(T, qd);
  s.attn = buffer(T, qd);
  s.k = buffer(T, kvd);
  s.v = buffer(T, kvd);
  s.o = buffer(T, H);
  s.down = buffer(T, H);
  s.gate = buffer(T, I);
  s.up = buffer(T, I);
  s.act = buffer(T, I);
  for (int64_t t = 0; t < T; ++t) rows_to_f32(embed_, tokens[static_cast<size_t>(t)], 1, s.x.data() + t * H);
  for (int l = 0; l < static_cast<int>(cfg_.num_layers); ++l) {
    attention_block(l, s, cache, rec);
    mlp_block(l, s, rec);
  }
  cache.length_ += T;
  return lm_head(s, req.logits, rec);
}

}  // namespace tessera::oracle
