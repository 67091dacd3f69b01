// The oracle on the default real model, SmolLM2-135M-Instruct Q4_1 GGUF read by
// tessera's own GGUF loader, against transformers reading the same file
// (tests/data/gguf/smollm2_reference.*, made by
// tools/reference/make_smollm2_fixtures.py): the same prompt ids, last-position
// logits within the oracle's tolerance (1e-4 of the row's logit range, as for
// every oracle fixture), and the same 16 greedy tokens through the KV cache
// wherever the fixture's own top-2 gap is wider than that tolerance allows to
// flip. Skipped when scripts/fetch-models has not been run.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/model/gguf.h"
#include "tessera/model/gguf_model.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/safetensors.h"
#include "tessera/oracle/oracle.h"

namespace tessera::oracle {
namespace {

namespace fs = std::filesystem;
const fs::path kModel = fs::path(TESSERA_SOURCE_DIR) / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const fs::path kData = fs::path(TESSERA_TEST_DATA) / "gguf";
constexpr double kLogitTol = 1e-4;  // of the logit range of the row (issue 2)

TEST(SmolLM2Gguf, OracleMatchesTransformers) {
  if (!fs::exists(kModel)) GTEST_SKIP() << kModel << " is absent: run scripts/fetch-models";
  std::ifstream f(kData / "smollm2_reference.json");
  const auto ref = nlohmann::json::parse(f);
  const model::Weights want_logits = model::load_safetensors(kData / "smollm2_reference.safetensors");
  const Tensor& last = want_logits.get("last_logits");

  const model::ModelDir m = model::load_model(kModel);
  ASSERT_EQ(m.config.num_layers, 30);
  ASSERT_EQ(m.config.hidden_size, 576);
  ASSERT_EQ(m.config.num_heads, 9);
  ASSERT_EQ(m.config.num_kv_heads, 3);
  ASSERT_EQ(m.config.vocab_size, 49152);
  ASSERT_TRUE(m.config.tie_word_embeddings);
  const model::Tokenizer tok = model::load_tokenizer(kModel);
  const Oracle oracle(m.config, m.weights);
  const int64_t V = m.config.vocab_size;

  const auto& prompts = ref.at("prompts");
  ASSERT_EQ(last.dim(0), static_cast<int64_t>(prompts.size()));
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& e = prompts[p];
    const auto ids = e.at("prompt_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(e.at("text").get<std::string>(), true), ids) << "prompt " << p;

    KvCache cache = oracle.new_cache();
    Tensor logits = oracle.forward(ids, cache);
    const float* want = last.as<float>().data() + p * static_cast<size_t>(V);
    const float* got = logits.as<float>().data();
    const auto [lo, hi] = std::minmax_element(want, want + V);
    const double range = *hi - *lo;
    double worst = 0;
    for (int64_t i = 0; i < V; ++i) worst = std::max(worst, std::abs(double{got[i]} - want[i]));
    RecordProperty(fmt::format("prompt{}_worst_logit_error_of_range", p),
                   fmt::format("{:.3e}", worst / range));
    EXPECT_LE(worst, kLogitTol * range) << "prompt " << p << ": worst logit error " << worst
                                        << " of range " << range;

    // Greedy through the KV cache; a fixture step whose top-2 gap is within
    // twice the tolerance may legitimately flip, and after it the sequences
    // need not agree.
    const auto greedy = e.at("greedy_ids").get<std::vector<int32_t>>();
    const auto gaps = e.at("top2_gaps").get<std::vector<double>>();
    for (size_t s = 0; s < greedy.size(); ++s) {
      const auto next = static_cast<int32_t>(
          std::max_element(logits.as<float>().begin(), logits.as<float>().end()) -
          logits.as<float>().begin());
      if (gaps[s] <= 2 * kLogitTol * range) {
        RecordProperty(fmt::format("prompt{}_near_tie_step", p), static_cast<int>(s));
        break;
      }
      ASSERT_EQ(next, greedy[s]) << "prompt " << p << " step " << s << " (fixture gap "
                                 << gaps[s] << ")";
      logits = oracle.forward(std::span(&next, 1), cache);
    }
  }
}

// The file's Q4_1 / Q8_0 tensors stay as it holds them (views of the mapping,
// q / k rows unpermuted block row by block row) and decode to the values the
// f32 path gave. The oracle on them sums a block row as stored wherever it
// multiplies one row (a decode step, and the prompt's last row by the LM
// head): block_dot_reference(), another rounding of the same sums, so its
// logits agree with the f32 copy's within the oracle's tolerance, with the
// same greedy token.
TEST(SmolLM2Gguf, BlockTensorsStayQuantizedAndMatchTheF32Path) {
  if (!fs::exists(kModel)) GTEST_SKIP() << kModel << " is absent: run scripts/fetch-models";
  const model::ModelDir m = model::load_model(kModel);
  const model::GgufFile file = model::GgufFile::open(kModel);
  const Tensor& q = m.weights.get("model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(q.dtype(), DType::q4_1);
  EXPECT_EQ(m.weights.get("model.embed_tokens.weight").dtype(), DType::q8_0);
  const Tensor q_f32 = model::unpermute_qk_rows(file.tensor_f32(*file.find_tensor("blk.3.attn_q.weight")),
                                               m.config.num_heads);
  EXPECT_EQ(q.to_f32_vector(), q_f32.to_f32_vector());

  model::Weights wide;
  for (const std::string& name : m.weights.names()) wide.add(name, m.weights.get(name).to(DType::f32));
  const Oracle quantized(m.config, m.weights), full(m.config, wide);
  KvCache ca = quantized.new_cache(), cb = full.new_cache();
  std::vector<int32_t> ids = {1, 504, 3458, 282, 4132, 30};
  bool decode_differs = false;
  for (int step = 0; step < 4; ++step) {
    const Tensor a = quantized.forward(ids, ca), b = full.forward(ids, cb);
    const std::vector<float> av = a.to_f32_vector(), bv = b.to_f32_vector();
    decode_differs = decode_differs || av != bv;
    const auto [lo, hi] = std::minmax_element(bv.begin(), bv.end());
    const double tol = kLogitTol * (*hi - *lo);
    for (size_t i = 0; i < av.size(); ++i) ASSERT_NEAR(av[i], bv[i], tol) << "step " << step << " logit " << i;
    const auto top = static_cast<int32_t>(std::max_element(av.begin(), av.end()) - av.begin());
    EXPECT_EQ(top, std::max_element(bv.begin(), bv.end()) - bv.begin()) << "step " << step;
    ids = {top};
  }
  // Not bit-equal, or the block GEMV did not run.
  EXPECT_TRUE(decode_differs);
}

}  // namespace
}  // namespace tessera::oracle
