#pragma once
// The FP32 CPU reference forward for llama / qwen2 / qwen3 decoder-only models,
// driven only by ModelConfig traits (qkv_bias, qk_norm, tied embeddings, rope
// scaling, decoupled head_dim, GQA ratio). It must match Hugging Face
// transformers (eager attention, float32) on the same weights; see
// tests/oracle/fixtures_test.cpp and tools/reference/make_oracle_fixtures.py.
//
// Prefill and decode are the same call: forward(tokens, cache) runs `tokens`
// at positions cache.length() .. cache.length() + n - 1 and appends their keys
// and values to the cache.
//
// Memory: the weight matrices (projections, embedding, LM head) are views of
// the source tensors in their own dtype (F32, BF16 or F16; the mmap stays
// shared), widened to f32 a block of rows at a time as each linear runs
// (ops.h), so a bf16 checkpoint costs its 2 P mapped bytes and no heap copy.
// The arithmetic stays FP32 and bit-identical to widening every weight once.
// A prefill (rows > 1) widens one matrix at a time for its sgemm: the largest
// matrix (often the LM head, vocab x hidden) is the transient peak. Norm
// weights and biases (small) are converted to F32 once.
// The KV cache costs 2 * layers * kv_dim * 4 bytes per position.
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/model/config.h"
#include "tessera/model/weights.h"
#include "tessera/oracle/taps.h"

namespace tessera::oracle {

// Keys (after RoPE) and values of every processed position, per layer,
// row-major [length, kv_dim].
class KvCache {
 public:
  KvCache() = default;
  KvCache(int64_t num_layers, int64_t kv_dim);
  int64_t length() const { return length_; }
  int64_t kv_dim() const { return kv_dim_; }
  int64_t num_layers() const { return static_cast<int64_t>(k_.size()); }
  const std::vector<float>& keys(int64_t layer) const { return k_.at(static_cast<size_t>(layer)); }
  const std::vector<float>& values(int64_t layer) const {
    return v_.at(static_cast<size_t>(layer));
  }
  void clear();
  size_t bytes() const;

 private:
  friend class Oracle;
  int64_t kv_dim_ = 0;
  int64_t length_ = 0;
  std::vector<std::vector<float>> k_, v_;
};

enum class LogitsMode {
  last,  // only the last position (generation): one LM-head row
  all,   // every position (fixtures, gates, teacher forcing)
};

struct ForwardRequest {
  LogitsMode logits = LogitsMode::last;
  const TapSet* want = nullptr;  // nullptr or empty: record nothing
  Taps* taps = nullptr;          // where wanted taps go (required if want is non-empty)
};

class Oracle {
 public:
  // Views the weight matrices, converts norms and biases to F32; throws TensorError if a tensor the config
  // needs is missing or mis-shaped (Weights::check_against).
  Oracle(model::ModelConfig config, const model::Weights& weights);

  // Logits F32 [1 or n, vocab]. Throws InputError for an empty batch or a token
  // id outside [0, vocab), LimitError when the positions would pass
  // max_position_embeddings or the activations (forward_bytes) would not fit
  // in the machine's memory; the cache is left untouched in those cases.
  Tensor forward(std::span<const int32_t> tokens, KvCache& cache,
                 const ForwardRequest& req = {}) const;
  // Host bytes one forward of `tokens` after `past` positions allocates:
  // scratch rows, attention scores [tokens, past + tokens], KV growth, logits,
  // and a copy of the scratch per layer when taps are recorded.
  size_t forward_bytes(int64_t tokens, int64_t past, bool taps) const;

  KvCache new_cache() const;
  const model::ModelConfig& config() const { return cfg_; }
  // Heap bytes of weights converted at construction (norms and biases of a
  // 16-bit checkpoint; weight matrices and F32 sources are views).
  size_t converted_weight_bytes() const { return converted_bytes_; }

 private:
  struct Layer {
    Tensor attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo;
    Tensor ffn_norm, w_gate, w_up, w_down;
  };
  struct Scratch;
  class Recorder;

  Tensor f32(const model::Weights& w, model::WeightRole role, int layer);
  Tensor matrix(const model::Weights& w, model::WeightRole role, int layer);
  void attention_block(int layer, Scratch& s, KvCache& cache, const Recorder& rec) const;
  void mlp_block(int layer, Scratch& s, const Recorder& rec) const;
  Tensor lm_head(Scratch& s, LogitsMode mode, const Recorder& rec) const;

  model::ModelConfig cfg_;
  std::vector<float> inv_freq_;
  Tensor embed_, final_norm_, lm_head_;  // lm_head_ aliases embed_ when tied (all views)
  std::vector<Layer> layers_;
  size_t converted_bytes_ = 0;
};

}  // namespace tessera::oracle
