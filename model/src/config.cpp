// config.json <-> ModelConfig. Semantics follow transformers' LlamaConfig,
// Qwen2Config and Qwen3Config: the same keys, the same defaults for keys a file
// may omit, and the same rope_scaling conventions ("type" is the legacy
// spelling of "rope_type"; "default" means no scaling). What tessera cannot
// model (o_proj/MLP biases, other activations, other rope types) is rejected
// here so that no later phase silently computes a different model than the one
// the file describes. A sliding window is kept as a limit on the context
// (ModelConfig::check_context): below it, windowed and full attention agree.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/config.h"

namespace tessera::model {
namespace {

using nlohmann::json;

// Field access that names the file and the key in every error.
class Fields {
 public:
  Fields(const json& j, const std::string& file) : j_(j), file_(file) {}

  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const char* key) const {
    const json* v = find(key);
    if (!v) throw_error<ConfigError>("{}: required field '{}' is missing", file_, key);
    return as_int(*v, key);
  }
  int64_t integer_or(const char* key, int64_t fallback) const {
    const json* v = find(key);
    return v ? as_int(*v, key) : fallback;
  }
  double number_or(const char* key, double fallback) const {
    return typed_or<double>(key, fallback, &json::is_number, "a number");
  }
  bool boolean_or(const char* key, bool fallback) const {
    return typed_or<bool>(key, fallback, &json::is_boolean, "true/false");
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    return typed_or<std::string>(key, fallback, &json::is_string, "a string");
  }
  // bos/eos: an int, a list of ints, or null/absent (empty).
  std::vector<int64_t> id_list(const char* key) const {
    const json* v = find(key);
    std::vector<int64_t> out;
    if (!v) return out;
    if (v->is_array()) {
      for (const auto& e : *v) out.push_back(as_int(e, key));
    } else {
      out.push_back(as_int(*v, key));
    }
    return out;
  }
  const std::string& file() const { return file_; }

 private:
  template <class T>
  T typed_or(const char* key, T fallback, bool (json::*is)() const noexcept,
             const char* what) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!(v->*is)())
      throw_error<ConfigError>("{}: field '{}' must be {}, got {}", file_, key, what, v->dump());
    return v->get<T>();
  }
  int64_t as_int(const json& v, const char* key) const {
    if (v.is_number_integer()) return v.get<int64_t>();
    // Some exporters write integral values as floats (e.g. 8192.0).
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
        std::fabs(v.get<double>()) < 9.0e15)
      return static_cast<int64_t>(v.get<double>());
    throw_error<ConfigError>("{}: field '{}' must be an integer, got {}", file_, key, v.dump());
  }
  const json& j_;
  const std::string& file_;
};

std::string architecture_of(const json& j, const std::string& file) {
  auto it = j.find("architectures");
  if (it == j.end() || it->is_null())
    throw_error<ConfigError>("{}: required field 'architectures' is missing", file);
  if (!it->is_array() || it->size() != 1 || !(*it)[0].is_string())
    throw_error<ConfigError>("{}: field 'architectures' must be a list of one class name, got {}",
                             file, it->dump());
  return (*it)[0].get<std::string>();
}

RopeScaling parse_rope_scaling(const json* rs, const std::string& file, const std::string& key) {
  RopeScaling r;
  if (!rs) return r;
  if (!rs->is_object())
    throw_error<ConfigError>("{}: field '{}' must be an object or null", file, key);
  Fields f(*rs, file);
  // transformers copies the legacy "type" into "rope_type" when only it is set.
  std::string type = f.string_or("rope_type", f.string_or("type", "default"));
  if (type == "default") return r;
  if (type != "llama3")
    throw_error<UnsupportedError>("{}: {}.rope_type '{}' is not supported (supported: default, "
                                  "llama3)", file, key, type);
  r.type = RopeScaling::Type::llama3;
  auto need = [&](const char* k) {
    if (!f.find(k))
      throw_error<ConfigError>("{}: {}.{} is required for rope_type llama3", file, key, k);
  };
  for (const char* k : {"factor", "low_freq_factor", "high_freq_factor",
                        "original_max_position_embeddings"})
    need(k);
  r.factor = f.number_or("factor", 0);
  r.low_freq_factor = f.number_or("low_freq_factor", 0);
  r.high_freq_factor = f.number_or("high_freq_factor", 0);
  r.original_max_position_embeddings = f.integer("original_max_position_embeddings");
  return r;
}

// Keys whose non-default values describe a model tessera does not compute.
void reject_unmodelled(const Fields& f, const ArchTraits& t) {
  std::string act = f.string_or("hidden_act", "silu");
  if (act != "silu")
    throw_error<UnsupportedError>("{}: hidden_act '{}' is not supported (supported: silu)",
                                  f.file(), act);
  if (f.boolean_or("mlp_bias", false))
    throw_error<UnsupportedError>("{}: mlp_bias=true is not supported", f.file());
  if (f.boolean_or("use_sliding_window", false))
    throw_error<UnsupportedError>("{}: use_sliding_window=true is not supported", f.file());
  // In Llama and Qwen3, attention_bias also gives o_proj a bias, which the
  // tensor table does not model; refusing beats computing a different model.
  if (t.honours_attention_bias_key && f.boolean_or("attention_bias", false))
    throw_error<UnsupportedError>("{}: attention_bias=true ({}: q/k/v/o biases) is not supported",
                                  f.file(), t.architecture);
  if (f.integer_or("pretraining_tp", 1) != 1)
    throw_error<UnsupportedError>("{}: pretraining_tp != 1 is not supported", f.file());
}

}  // namespace

ModelConfig parse_config(const nlohmann::json& j, const std::string& name) {
  if (!j.is_object()) throw_error<ConfigError>("{}: top level must be a JSON object", name);
  Fields f(j, name);
  ModelConfig c;
  c.name = name;
  c.traits = arch_traits(architecture_of(j, name));
  reject_unmodelled(f, c.traits);
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer_or("num_key_value_heads", c.num_heads);
  c.vocab_size = f.integer("vocab_size");
  int64_t derived = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  c.head_dim = f.integer_or("head_dim", c.traits.default_head_dim ? c.traits.default_head_dim
                                                                   : derived);
  c.max_position_embeddings =
      f.integer_or("max_position_embeddings", c.traits.default_max_position_embeddings);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  // Newer transformers nest theta and the scaling under "rope_parameters".
  const json* rp = f.find("rope_parameters");
  c.rope_theta = f.number_or("rope_theta", rp && rp->is_object()
                                               ? Fields(*rp, name).number_or("rope_theta", 1e4)
                                               : 1e4);
  c.rope_scaling = f.find("rope_scaling")
                       ? parse_rope_scaling(f.find("rope_scaling"), name, "rope_scaling")
                       : parse_rope_scaling(rp, name, "rope_parameters");
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
  c.qkv_bias = c.traits.qkv_bias;
  c.qk_norm = c.traits.qk_norm;
  c.bos_token_ids = f.id_list("bos_token_id");
  c.eos_token_ids = f.id_list("eos_token_id");
  c.torch_dtype = f.string_or("torch_dtype", f.string_or("dtype", "bfloat16"));
  if (c.traits.sliding_window_always)  // null: no window; absent: the class default
    c.sliding_window = j.contains("sliding_window") ? f.integer_or("sliding_window", 0)
                                                    : c.traits.default_sliding_window;
  c.validate();
  return c;
}

int64_t ModelConfig::default_context() const {
  return std::min<int64_t>(max_position_embeddings, 4096);
}

void ModelConfig::check_context(int64_t context) const {
  if (context > max_position_embeddings)
    throw_error<UsageError>("{}: context {} exceeds max_position_embeddings {}", name, context,
                            max_position_embeddings);
  if (sliding_window > 0 && context > sliding_window)
    throw_error<UnsupportedError>("{}: sliding_window {} would bind at context {} (tessera "
                                  "computes full causal attention; use a context <= {})",
                                  name, sliding_window, context, sliding_window);
}

void ModelConfig::validate() const {
  auto positive = [&](const char* field, int64_t v) {
    if (v <= 0) throw_error<ConfigError>("{}: {} must be positive, got {}", name, field, v);
  };
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_layers);
  positive("num_attention_heads", num_heads);
  positive("num_key_value_heads", num_kv_heads);
  positive("head_dim", head_dim);
  positive("vocab_size", vocab_size);
  positive("max_position_embeddings", max_position_embeddings);
  // Sane upper bounds, checked before anything is sized from these fields (a
  // corrupted num_hidden_layers must be an error, not an allocation).
  auto at_most = [&](const char* field, int64_t v, int64_t limit, const char* why) {
    if (v > limit)
      throw_error<ConfigError>("{}: {} {} exceeds the limit {} ({})", name, field, v, limit, why);
  };
  at_most("num_hidden_layers", num_layers, kMaxLayers, "the deepest published decoder has 126");
  at_most("hidden_size", hidden_size, kMaxWidth, "published decoders stay below 2^15");
  at_most("intermediate_size", intermediate_size, kMaxWidth, "published decoders stay below 2^17");
  at_most("num_attention_heads", num_heads, kMaxHeads, "published decoders have at most 128");
  at_most("head_dim", head_dim, kMaxHeadDim, "published decoders use at most 256");
  at_most("vocab_size", vocab_size, kMaxVocab, "token ids travel as f32, exact below 2^24");
  at_most("max_position_embeddings", max_position_embeddings, kMaxPositions,
          "published decoders stay below 2^21");
  if (sliding_window < 0)
    throw_error<ConfigError>("{}: sliding_window must be positive or null, got {}", name,
                             sliding_window);
  if (sliding_window > 0 && sliding_window < default_context())
    throw_error<UnsupportedError>("{}: sliding_window {} is shorter than the context {} tessera "
                                  "deploys with, so it would bind (only full causal attention is "
                                  "supported)", name, sliding_window, default_context());
  if (num_heads % num_kv_heads != 0)
    throw_error<ConfigError>("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                             name, num_heads, num_kv_heads);
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps))
    throw_error<ConfigError>("{}: rms_norm_eps must be positive, got {}", name, rms_norm_eps);
  if (!(rope_theta > 0) || !std::isfinite(rope_theta))
    throw_error<ConfigError>("{}: rope_theta must be positive, got {}", name, rope_theta);
  if (head_dim % 2 != 0)
    throw_error<ConfigError>("{}: head_dim {} must be even for rotary embeddings", name, head_dim);
  if (rope_scaling.type == RopeScaling::Type::llama3) {
    const auto& r = rope_scaling;
    if (!(r.factor > 0) || !(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor))
      throw_error<ConfigError>("{}: rope_scaling llama3 needs factor > 0 and 0 < low_freq_factor < "
                               "high_freq_factor (got {}, {}, {})",
                               name, r.factor, r.low_freq_factor, r.high_freq_factor);
    positive("rope_scaling.original_max_position_embeddings", r.original_max_position_embeddings);
  }
  for (const auto* ids : {&bos_token_ids, &eos_token_ids})
    for (int64_t id : *ids)
      if (id < 0 || id >= vocab_size)
        throw_error<ConfigError>("{}: {} {} is outside the vocabulary [0, {})", name,
                                 ids == &bos_token_ids ? "bos_token_id" : "eos_token_id", id,
                                 vocab_size);
}

ModelConfig load_config(const std::filesystem::path& config_json) {
  std::ifstream in(config_json);
  if (!in) throw_error<FileError>("{}: cannot open config", config_json.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e309
    throw_error<ConfigError>("{}: invalid JSON: {}", config_json.string(), e.what());
  }
  ModelConfig c = parse_config(j, config_json.string());
  auto dir = config_json.parent_path().filename();
  c.name = dir.empty() ? config_json.string() : dir.string();
  return c;
}

nlohmann::json config_to_json(const ModelConfig& c) {
  auto ids = [](const std::vector<int64_t>& v) -> json {
    if (v.empty()) return nullptr;
    if (v.size() == 1) return v[0];
    return v;
  };
  json j = {
      {"architectures", json::array({c.traits.architecture})},
      {"model_type", c.traits.family},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"hidden_act", "silu"},
      {"bos_token_id", ids(c.bos_token_ids)},
      {"eos_token_id", ids(c.eos_token_ids)},
      {"torch_dtype", c.torch_dtype},
  };
  if (c.traits.honours_attention_bias_key) j["attention_bias"] = c.qkv_bias;
  if (c.traits.sliding_window_always)
    j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  if (c.rope_scaling.type == RopeScaling::Type::llama3) {
    const auto& r = c.rope_scaling;
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", r.factor},
                         {"low_freq_factor", r.low_freq_factor},
                         {"high_freq_factor", r.high_freq_factor},
                         {"original_max_position_embeddings", r.original_max_position_embeddings}};
  }
  return j;
}

std::string config_summary(const ModelConfig& c) {
  std::string traits;
  if (c.qkv_bias) traits += " qkv_bias";
  if (c.qk_norm) traits += " qk_norm";
  if (c.tie_word_embeddings) traits += " tied";
  if (c.rope_scaling.type == RopeScaling::Type::llama3)
    traits += fmt::format(" rope=llama3(x{})", c.rope_scaling.factor);
  if (c.sliding_window > 0) traits += fmt::format(" window={}", c.sliding_window);
  return fmt::format("{}: {} layers={} hidden={} ffn={} heads={}/{} head_dim={} vocab={} "
                     "theta={} params={}{}",
                     c.name, c.traits.architecture, c.num_layers, c.hidden_size,
                     c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size,
                     c.rope_theta, c.parameter_count(), traits);
}

}  // namespace tessera::model
