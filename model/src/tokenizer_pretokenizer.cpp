// Pre-tokenizers: Split (regex or literal, every HF split behaviour, invert),
// ByteLevel (optional prefix space, GPT-2 regex, byte -> printable char) and
// Sequence. Semantics follow tokenizers/src/pre_tokenizers and the
// SplitDelimiterBehavior handling in tokenizers/src/tokenizer/normalizer.rs.
#include <memory>

#include "tessera/core/error.h"
#include "tessera/model/tokenizer_parts.h"

namespace tessera::model::tok {
namespace {

struct Span {
  size_t b, e;
  bool is_match;
};

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

Behavior parse_behavior(const std::string& s, const std::string& where) {
  if (s == "Removed") return Behavior::removed;
  if (s == "Isolated") return Behavior::isolated;
  if (s == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (s == "MergedWithNext") return Behavior::merged_with_next;
  if (s == "Contiguous") return Behavior::contiguous;
  throw_error<TokenizerError>(
      "{}: unknown split behavior '{}' (Removed, Isolated, MergedWithPrevious, MergedWithNext, "
      "Contiguous)",
      where, s);
}

// Folds the spans of one piece the way each HF behavior does.
std::vector<Span> apply_behavior(const std::vector<Span>& spans, Behavior bh) {
  std::vector<Span> out;
  bool prev_match = false;
  switch (bh) {
    case Behavior::removed:
      for (auto& s : spans)
        if (!s.is_match) out.push_back(s);
      return out;
    case Behavior::isolated:
      return spans;
    case Behavior::merged_with_previous:
      for (auto& s : spans) {
        if (s.is_match && !prev_match && !out.empty())
          out.back().e = s.e;
        else
          out.push_back(s);
        prev_match = s.is_match;
      }
      return out;
    case Behavior::contiguous:
      for (auto& s : spans) {
        if (s.is_match == prev_match && !out.empty())
          out.back().e = s.e;
        else
          out.push_back(s);
        prev_match = s.is_match;
      }
      return out;
    case Behavior::merged_with_next:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !prev_match && !out.empty())
          out.back().b = it->b;
        else
          out.push_back(*it);
        prev_match = it->is_match;
      }
      return {out.rbegin(), out.rend()};
  }
  return out;
}

// Matches of a pattern plus the gaps between them, covering the whole piece.
std::vector<Span> cover(std::string_view s, const std::vector<std::pair<size_t, size_t>>& m,
                        bool invert) {
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : m) {
    if (b > prev) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < s.size()) spans.push_back({prev, s.size(), invert});
  return spans;
}

void append_pieces(std::string_view s, const std::vector<Span>& spans, Pieces& out) {
  for (auto& sp : spans)
    if (sp.e > sp.b) out.emplace_back(s.substr(sp.b, sp.e - sp.b));
}

class SplitPre : public PreTokenizer {
 public:
  SplitPre(const json& j, const std::string& where) {
    const json& pat = field(j, "pattern", where);
    if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string()) {
      regex_ = std::make_unique<Regex>(pat["Regex"].get<std::string>(), where + ".pattern");
    } else if (pat.is_object() && pat.contains("String") && pat["String"].is_string()) {
      literal_ = pat["String"].get<std::string>();
    } else {
      throw_error<TokenizerError>("{}: pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}",
                                  where);
    }
    const json& bh = field(j, "behavior", where);
    if (!bh.is_string()) throw_error<TokenizerError>("{}: behavior must be a string", where);
    behavior_ = parse_behavior(bh.get<std::string>(), where);
    invert_ = flag(j, "invert", false, where);
  }
  void pre_tokenize(Pieces& pieces) const override {
    Pieces out;
    std::vector<std::pair<size_t, size_t>> m;
    for (const auto& p : pieces) {
      m.clear();
      if (regex_) {
        regex_->find_all(p, [&](size_t b, size_t e) { m.emplace_back(b, e); });
      } else if (!literal_.empty()) {
        for (size_t at = p.find(literal_); at != std::string::npos;
             at = p.find(literal_, at + literal_.size()))
          m.emplace_back(at, at + literal_.size());
      }
      append_pieces(p, apply_behavior(cover(p, m, invert_), behavior_), out);
    }
    pieces = std::move(out);
  }
  std::string name() const override { return "Split"; }

 private:
  std::unique_ptr<Regex> regex_;
  std::string literal_;
  Behavior behavior_ = Behavior::isolated;
  bool invert_ = false;
};

// The GPT-2 pattern HF's ByteLevel uses when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(const json& j, const std::string& where)
      : add_prefix_space_(flag(j, "add_prefix_space", true, where)) {
    if (flag(j, "use_regex", true, where)) regex_ = std::make_unique<Regex>(kGpt2Pattern, where);
  }
  void pre_tokenize(Pieces& pieces) const override {
    Pieces out;
    std::string buf;
    std::vector<std::pair<size_t, size_t>> m;
    for (const auto& p : pieces) {
      std::string_view s = p;
      if (add_prefix_space_ && (p.empty() || p[0] != ' ')) {
        buf = " " + p;
        s = buf;
      }
      if (!regex_) {
        if (!s.empty()) out.push_back(byte_level_encode(s));
        continue;
      }
      m.clear();
      regex_->find_all(s, [&](size_t b, size_t e) { m.emplace_back(b, e); });
      for (auto& sp : cover(s, m, false))
        if (sp.e > sp.b) out.push_back(byte_level_encode(s.substr(sp.b, sp.e - sp.b)));
    }
    pieces = std::move(out);
  }
  std::string name() const override { return "ByteLevel"; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(Pieces& pieces) const override {
    for (auto& p : parts_) p->pre_tokenize(pieces);
  }
  std::string name() const override { return sequence_name(parts_); }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "Split") return std::make_unique<SplitPre>(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPre>(j, where);
  if (type == "Sequence") {
    auto parts = sequence_parts<PreTokenizer>(j, "pretokenizers", where, make_pre_tokenizer);
    return std::make_unique<SequencePre>(std::move(parts));
  }
  throw_error<TokenizerError>(
      "{}: unsupported pre_tokenizer type '{}' (supported: Split, ByteLevel, Sequence)", where,
      type);
}

}  // namespace tessera::model::tok
