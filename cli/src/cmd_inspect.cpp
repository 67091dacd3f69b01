// tessera inspect DIR|GGUF: what a model directory or GGUF file holds, checked as it
// loads.
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "tessera/core/error.h"
#include "tessera/model/chat_template.h"
#include "tessera/model/gguf_model.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/tensor_table.h"

namespace {

namespace mdl = tessera::model;

std::string grouped(uint64_t n) {  // 1235814400 -> "1,235,814,400"
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string ids(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

void print_config(const mdl::ModelConfig& c) {
  const auto& r = c.rope_scaling;
  std::string rope = r.type == mdl::RopeScaling::Type::llama3
                         ? fmt::format("llama3 (factor {}, low {}, high {}, original {})",
                                       r.factor, r.low_freq_factor, r.high_freq_factor,
                                       r.original_max_position_embeddings)
                         : "none";
  fmt::print("architecture: {} (family {})\n", c.traits.architecture, c.traits.family);
  fmt::print("traits:       qkv_bias={} qk_norm={} tied_embeddings={} rope_scaling={}\n",
             c.qkv_bias, c.qk_norm, c.tie_word_embeddings, rope);
  fmt::print("shape:        layers={} hidden={} intermediate={} heads={} kv_heads={} "
             "(group {}) head_dim={} q_dim={} kv_dim={} vocab={}\n",
             c.num_layers, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads,
             c.gqa_group(), c.head_dim, c.q_dim(), c.kv_dim(), c.vocab_size);
  fmt::print("numerics:     rope_theta={} rms_norm_eps={} max_position_embeddings={} "
             "torch_dtype={}\n", c.rope_theta, c.rms_norm_eps, c.max_position_embeddings,
             c.torch_dtype);
  fmt::print("special ids:  bos={} eos={}\n", ids(c.bos_token_ids), ids(c.eos_token_ids));
  // validate() already refused a window shorter than the default context.
  if (c.sliding_window > 0)
    fmt::print("attention:    sliding_window={} >= context {}: cannot bind, full causal "
               "attention is exact (a context above {} is refused)\n",
               c.sliding_window, c.default_context(), c.sliding_window);
  else
    fmt::print("attention:    full causal (no sliding window)\n");
}

void print_weights(const mdl::ModelDir& m) {
  std::map<std::string, uint64_t> bytes;
  for (const auto& n : m.weights.names()) {
    const auto& t = m.weights.get(n);
    bytes[std::string(tessera::dtype_name(t.dtype()))] += t.nbytes();
  }
  fmt::print("parameters:   {} in {} tensors\n", grouped(m.config.parameter_count()),
             m.weights.size());
  for (const auto& [d, b] : bytes) fmt::print("bytes {:<6}  {}\n", d, grouped(b));
  std::set<std::string> seen;  // one line per role: layers repeat the same shapes
  for (const auto& s : mdl::tensor_specs(m.config))
    if (seen.insert(mdl::role_name(s.role)).second)
      fmt::print("  {:<12} {:<16} {}\n", mdl::role_name(s.role), tessera::shape_str(s.shape),
                 s.layer >= 0 ? fmt::format("x {} layers", m.config.num_layers) : "");
}

// Container facts: what a GGUF stores before dequantization to F32.
void print_gguf(const mdl::GgufFile& f) {
  std::map<std::string, std::pair<int, uint64_t>> by_type;  // count, bytes
  for (const auto& t : f.tensors()) {
    auto& e = by_type[mdl::ggml_type_info(t.type)->name];
    ++e.first;
    e.second += t.nbytes;
  }
  std::vector<std::string> parts;
  for (const auto& [n, e] : by_type) parts.push_back(fmt::format("{} x{} ({} B)", n, e.first, grouped(e.second)));
  fmt::print("gguf:         v{} alignment={} metadata={} tensors={}: {}\n", f.version(),
             f.alignment(), f.metadata().size(), f.tensors().size(), fmt::join(parts, ", "));
}

// Read with nlohmann directly: inspect reports what the file says even when
// the tokenizer itself would reject it.
void print_tokenizer(const std::filesystem::path& dir) {
  if (mdl::is_gguf_file(dir)) {
    fmt::print("tokenizer:    {}\n", mdl::load_tokenizer(dir).summary());
    return;
  }
  auto path = dir / "tokenizer.json";
  std::ifstream in(path);
  if (!in) {
    fmt::print("tokenizer:    none (no tokenizer.json)\n");
    return;
  }
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("model") || !j["model"].is_object())
    throw tessera::TokenizerError(fmt::format("{}: not a tokenizer.json", path.string()));
  const auto& model = j["model"];
  auto count = [](const nlohmann::json& v) { return v.is_structured() ? v.size() : 0; };
  std::vector<std::string> added;
  for (const auto& a : j.value("added_tokens", nlohmann::json::array()))
    if (a.is_object())
      added.push_back(fmt::format("{}={}", a.value("content", "?"), a.value("id", -1)));
  std::string pre = j.contains("pre_tokenizer") && j["pre_tokenizer"].is_object()
                        ? j["pre_tokenizer"].value("type", "?") : "none";
  fmt::print("tokenizer:    {} vocab={} merges={} added={} [{}] pre_tokenizer={}\n",
             model.value("type", "?"), count(model.value("vocab", nlohmann::json())),
             count(model.value("merges", nlohmann::json())), added.size(),
             fmt::join(added, ", "), pre);
}

// Reported, not fatal: a model without a known template still inspects.
void print_chat_template(const std::filesystem::path& p) {
  try {
    const auto t = mdl::ChatTemplate::from_model(p);
    fmt::print("chat:         {}{}\n", t.format_name(),
               t.default_system() ? fmt::format(" (default system: {:?})", *t.default_system())
                                  : "");
  } catch (const tessera::InputError& e) {
    fmt::print("chat:         none ({})\n", e.what());
  }
}

tessera::cli::Action setup_inspect(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("inspect", "Describe a model directory or GGUF file");
  sub->add_option("dir", *dir, "Model directory (config.json + safetensors) or .gguf file")
      ->required();
  return [dir] {
    auto m = mdl::load_model(*dir);
    fmt::print("model:        {}\n", m.path.string());
    if (mdl::is_gguf_file(*dir)) print_gguf(mdl::GgufFile::open(*dir));
    print_config(m.config);
    print_weights(m);
    print_tokenizer(m.path);
    print_chat_template(m.path);
    // Printed first (what the file says), then checked: a tokenizer that does
    // not parse or whose ids pass the model's vocab_size fails inspect here,
    // not generate later on real text (a GGUF's tokenizer is checked the same).
    if (mdl::is_gguf_file(m.path) || std::filesystem::exists(m.path / "tokenizer.json"))
      mdl::load_tokenizer(m.path, m.config);
    return 0;
  };
}
TESSERA_COMMAND("inspect", setup_inspect);

}  // namespace
