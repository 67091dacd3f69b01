// Post-processors: TemplateProcessing (e.g. Llama-3's BOS), ByteLevel (only
// trims offsets, so it leaves ids alone) and Sequence.
#include "tessera/core/error.h"
#include "tessera/model/tokenizer_parts.h"

namespace tessera::model::tok {
namespace {

class ByteLevelPost : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
  std::string name() const override { return "ByteLevel"; }
};

// Only the single-sequence template: tessera never encodes sentence pairs.
class TemplatePost : public PostProcessor {
 public:
  TemplatePost(const json& j, const std::string& where,
               const std::function<bool(int32_t)>& id_exists) {
    const json& specials = field(j, "special_tokens", where);
    if (!specials.is_object())
      throw_error<TokenizerError>("{}: special_tokens must be an object", where);
    const json& single = field(j, "single", where);
    if (!single.is_array()) throw_error<TokenizerError>("{}: single must be an array", where);
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string at = fmt::format("{}.single[{}]", where, i);
      const json& piece = single[i];
      if (piece.is_object() && piece.contains("Sequence")) {
        const json& seq = field(piece["Sequence"], "id", at);
        if (seq != "A")
          throw_error<TokenizerError>("{}: a single-sequence template can only hold sequence A, "
                                      "got {}", at, seq.dump());
        items_.push_back({});
        continue;
      }
      if (!piece.is_object() || !piece.contains("SpecialToken"))
        throw_error<TokenizerError>("{}: expected {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}",
                                    at);
      const json& name = field(piece["SpecialToken"], "id", at);
      if (!name.is_string() || !specials.contains(name.get<std::string>()))
        throw_error<TokenizerError>("{}: special token {} is not in special_tokens", at,
                                    name.dump());
      const json& ids = field(specials[name.get<std::string>()], "ids", at);
      Item item{true, {}};
      for (const json& id : ids) {
        if (!id.is_number_integer() || !id_exists(id.get<int32_t>()))
          throw_error<TokenizerError>("{}: special token {} has id {} with no token", at,
                                      name.dump(), id.dump());
        item.ids.push_back(id.get<int32_t>());
      }
      items_.push_back(std::move(item));
    }
  }
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    std::vector<int32_t> out;
    out.reserve(ids.size() + items_.size());
    for (const Item& it : items_) {
      if (it.special)
        out.insert(out.end(), it.ids.begin(), it.ids.end());
      else
        out.insert(out.end(), ids.begin(), ids.end());
    }
    ids = std::move(out);
  }
  std::string name() const override { return "TemplateProcessing"; }

 private:
  struct Item {
    bool special = false;  // false: the encoded sequence itself
    std::vector<int32_t> ids;
  };
  std::vector<Item> items_;
};

class SequencePost : public PostProcessor {
 public:
  explicit SequencePost(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (auto& p : parts_) p->process(ids, add_special_tokens);
  }
  std::string name() const override { return sequence_name(parts_); }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const json& j, const std::string& where,
                                                   const std::function<bool(int32_t)>& id_exists) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPost>();
  if (type == "TemplateProcessing") return std::make_unique<TemplatePost>(j, where, id_exists);
  if (type == "Sequence") {
    auto parts = sequence_parts<PostProcessor>(j, "processors", where, [&](const json& e, const std::string& w) { return make_post_processor(e, w, id_exists); });
    return std::make_unique<SequencePost>(std::move(parts));
  }
  throw_error<TokenizerError>(
      "{}: unsupported post_processor type '{}' (supported: TemplateProcessing, ByteLevel, "
      "Sequence)",
      where, type);
}

}  // namespace tessera::model::tok
