// Tokenizer: loads tokenizer.json and runs the HF pipeline
// (tokenizers/src/tokenizer/mod.rs encode_single_sequence):
// raw added tokens -> normalizer -> normalized added tokens -> pre-tokenizer
// -> BPE per piece -> post-processor.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/tokenizer.h"
#include "tessera/model/tokenizer_parts.h"

namespace tessera::model {
namespace tok {

const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    throw_error<TokenizerError>("{}: missing field '{}'", where, key);
  return j[key];
}

bool flag(const json& j, const char* key, bool dflt, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean()) throw_error<TokenizerError>("{}: '{}' must be true or false", where, key);
  return j[key].get<bool>();
}

std::string type_of(const json& j, const std::string& where) {
  const json& t = field(j, "type", where);
  if (!t.is_string()) throw_error<TokenizerError>("{}: 'type' must be a string", where);
  return t.get<std::string>();
}

namespace {

std::vector<AddedToken> parse_added(const json& j, const BpeModel& model, const std::string& src) {
  std::vector<AddedToken> out;
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return out;
  const json& list = j["added_tokens"];
  if (!list.is_array()) throw_error<TokenizerError>("{}: added_tokens must be an array", src);
  std::unordered_map<int32_t, std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("{}: added_tokens[{}]", src, i);
    const json& e = list[i];
    const json& id = field(e, "id", where);
    const json& content = field(e, "content", where);
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw_error<TokenizerError>("{}: id must be a non-negative 32-bit integer, got {}", where,
                                  id.dump());
    if (!content.is_string()) throw_error<TokenizerError>("{}: content must be a string", where);
    AddedToken t;
    t.id = id.get<int32_t>();
    t.content = content.get<std::string>();
    t.special = flag(e, "special", false, where);
    // HF's AddedToken::from(content, special) default when the flag is absent.
    t.normalized = flag(e, "normalized", !t.special, where);
    t.single_word = flag(e, "single_word", false, where);
    t.lstrip = flag(e, "lstrip", false, where);
    t.rstrip = flag(e, "rstrip", false, where);
    if (auto [it, fresh] = seen.emplace(t.id, t.content); !fresh)
      throw_error<TokenizerError>("{}: duplicate id {} ('{}' and '{}')", where, t.id, it->second,
                                  t.content);
    const std::string* in_vocab = model.id_to_token(t.id);
    if (in_vocab && *in_vocab != t.content)
      throw_error<TokenizerError>("{}: id {} of '{}' is already the vocab token '{}'", where, t.id,
                                  t.content, *in_vocab);
    if (auto vid = model.token_to_id(t.content); vid && *vid != t.id)
      throw_error<TokenizerError>("{}: '{}' has id {} but the vocab gives it id {}", where,
                                  t.content, t.id, *vid);
    out.push_back(std::move(t));
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

}  // namespace
}  // namespace tok

Tokenizer::Tokenizer(std::shared_ptr<const tok::TokenizerImpl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  std::filesystem::path p = path;
  if (std::filesystem::is_directory(p)) p /= "tokenizer.json";
  std::ifstream in(p, std::ios::binary);
  if (!in) throw_error<FileError>("{}: cannot open tokenizer file", p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) throw_error<TokenizerError>("{}: not valid JSON", p.string());
  return from_json(j, p.string());
}

Tokenizer Tokenizer::from_json(const nlohmann::json& j, const std::string& source_name) {
  const std::string& src = source_name;
  if (!j.is_object()) throw_error<TokenizerError>("{}: top level must be a JSON object", src);
  if (!j.contains("model") || j["model"].is_null())
    throw_error<TokenizerError>("{}: missing 'model' (the BPE vocab and merges)", src);
  auto impl = std::make_shared<tok::TokenizerImpl>();
  impl->source = src;
  impl->model = std::make_unique<tok::BpeModel>(j["model"], src + ": model");
  const tok::json null_json;
  auto get = [&](const char* k) -> const tok::json& { return j.contains(k) ? j[k] : null_json; };
  impl->normalizer = tok::make_normalizer(get("normalizer"), src + ": normalizer");
  impl->pre_tokenizer = tok::make_pre_tokenizer(get("pre_tokenizer"), src + ": pre_tokenizer");
  impl->decoder = tok::make_decoder(get("decoder"), src + ": decoder");
  auto added = tok::parse_added(j, *impl->model, src);
  int64_t limit = impl->model->id_limit();
  for (const auto& t : added) limit = std::max<int64_t>(limit, int64_t{t.id} + 1);
  impl->vocab_size = limit;
  impl->added = std::make_unique<tok::AddedVocabulary>(std::move(added), impl->normalizer.get());
  const tok::TokenizerImpl* raw = impl.get();
  impl->post_processor = tok::make_post_processor(
      get("post_processor"), src + ": post_processor",
      [raw](int32_t id) { return raw->added->find(id) || raw->model->id_to_token(id); });
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const tok::TokenizerImpl& t = *impl_;
  std::string repaired;
  if (!tok::is_valid_utf8(text)) {
    repaired = tok::to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  std::vector<tok::Segment> raw, norm;
  t.added->split(text, false, raw);
  tok::Pieces pieces;
  for (const auto& seg : raw) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    norm.clear();
    if (t.normalizer)
      t.added->split(t.normalizer->normalize(seg.text), true, norm);
    else
      t.added->split(seg.text, true, norm);
    for (const auto& s : norm) {
      if (s.id >= 0) {
        ids.push_back(s.id);
        continue;
      }
      pieces.assign(1, s.text);
      if (t.pre_tokenizer) t.pre_tokenizer->pre_tokenize(pieces);
      for (const auto& p : pieces) t.model->tokenize(p, ids);
    }
  }
  if (t.post_processor) t.post_processor->process(ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const tok::TokenizerImpl& t = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* a = t.added->find(id)) {
      if (!(skip_special_tokens && a->special)) tokens.push_back(a->content);
      continue;
    }
    // HF drops ids with no token; models often have more embedding rows than
    // the tokenizer has tokens (Qwen: 151936 vs 151669), and a sampler may pick one.
    const std::string* s = t.model->id_to_token(id);
    if (!s) continue;
    tokens.push_back(*s);
  }
  if (!t.decoder) return tok::join(tokens, " ");
  return tok::join(t.decoder->decode_chain(std::move(tokens)), "");
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added->token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* a = impl_->added->find(id)) return a->content;
  if (const std::string* s = impl_->model->id_to_token(id)) return *s;
  throw_error<TokenizerError>("{}: no token with id {} (vocab size {})", impl_->source, id,
                              impl_->vocab_size);
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* a = impl_->added->find(id);
  return a && a->special;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added->tokens(); }

const std::string& Tokenizer::source_name() const { return impl_->source; }

std::string Tokenizer::summary() const {
  const tok::TokenizerImpl& t = *impl_;
  size_t special = 0;
  for (const auto& a : t.added->tokens()) special += a.special;
  auto nm = [](const auto& p) { return p ? p->name() : std::string("none"); };
  return fmt::format(
      "BPE, {} ids ({} vocab + {} added, {} special), {} merges{}; normalizer {}; "
      "pre-tokenizer {}; post-processor {}; decoder {}",
      t.vocab_size, t.model->size(), t.added->tokens().size(), special, t.model->merge_count(),
      t.model->ignore_merges() ? ", ignore_merges" : "", nm(t.normalizer), nm(t.pre_tokenizer),
      nm(t.post_processor), nm(t.decoder));
}

}  // namespace tessera::model
