// Added tokens: found in the text before pre-tokenization, leftmost-longest,
// honouring single_word / lstrip / rstrip (tokenizers/src/tokenizer/added_vocabulary.rs).
// Tokens with normalized=false match the raw text; the others match the
// normalized text, against their own normalized content.
#include "tessera/core/error.h"
#include "tessera/model/tokenizer_parts.h"

namespace tessera::model::tok {

int32_t AddedVocabulary::Trie::add_node() {
  next.push_back({});
  next.back().fill(0);
  token.push_back(-1);
  return static_cast<int32_t>(token.size() - 1);
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  raw_.add_node();
  norm_.add_node();
  bool any_single_word = false;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    AddedToken& t = tokens_[i];
    // HF stores a normalized token by its normalized content: that is what it
    // matches, what id_to_token returns and what the decoder sees.
    if (t.normalized && normalizer) t.content = normalizer->normalize(t.content);
    by_id_.emplace(t.id, i);
    by_content_.emplace(t.content, t.id);
    any_single_word |= t.single_word;
    const std::string& key = t.content;
    if (key.empty()) continue;  // an empty token can never be matched
    Trie& trie = t.normalized ? norm_ : raw_;
    int32_t node = 0;
    for (unsigned char c : key) {
      if (trie.next[static_cast<size_t>(node)][c] == 0) {
        int32_t child = trie.add_node();
        trie.next[static_cast<size_t>(node)][c] = child;
      }
      node = trie.next[static_cast<size_t>(node)][c];
    }
    // Two tokens with the same content: the first listed wins, as the first
    // pattern does in HF's matcher.
    if (trie.token[static_cast<size_t>(node)] < 0)
      trie.token[static_cast<size_t>(node)] = static_cast<int32_t>(i);
  }
  if (any_single_word) {
    word_end_ = std::make_unique<Regex>(R"(\w\z)", "added_tokens single_word");
    word_start_ = std::make_unique<Regex>(R"(\A\w)", "added_tokens single_word");
  }
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

size_t AddedVocabulary::longest_match(const Trie& t, std::string_view s, size_t at,
                                      int32_t& tok) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = at; i < s.size(); ++i) {
    node = t.next[static_cast<size_t>(node)][static_cast<unsigned char>(s[i])];
    if (node == 0) break;
    if (t.token[static_cast<size_t>(node)] >= 0) {
      best = i + 1 - at;
      tok = t.token[static_cast<size_t>(node)];
    }
  }
  return best;
}

bool AddedVocabulary::word_boundary_ok(std::string_view s, size_t b, size_t e) const {
  const bool start_ok = b == 0 || !word_end_->matches_anywhere(s.substr(0, b));
  const bool stop_ok = e == s.size() || !word_start_->matches_anywhere(s.substr(e));
  return start_ok && stop_ok;
}

void AddedVocabulary::split(std::string_view s, bool normalized, std::vector<Segment>& out) const {
  const Trie& trie = normalized ? norm_ : raw_;
  size_t done = 0;  // end of the text already emitted
  auto emit_text = [&](size_t e) {
    if (e > done) out.push_back({std::string(s.substr(done, e - done)), -1});
  };
  for (size_t i = 0; i < s.size();) {
    int32_t tok = -1;
    size_t len = trie.token.size() > 1 ? longest_match(trie, s, i, tok) : 0;
    if (len == 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[static_cast<size_t>(tok)];
    size_t b = i, e = i + len;
    if (t.single_word && !word_boundary_ok(s, b, e)) {
      i = e;  // the matcher resumes after a rejected match, not inside it
      continue;
    }
    if (t.lstrip) {
      size_t nb = b;
      while (nb > done) {
        size_t k = nb - 1;
        while (k > done && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t j = k;
        if (!is_unicode_whitespace(next_code_point(s, j))) break;
        nb = k;
      }
      b = nb;
    }
    if (t.rstrip) {
      while (e < s.size()) {
        size_t j = e;
        if (!is_unicode_whitespace(next_code_point(s, j))) break;
        e = j;
      }
    }
    emit_text(b);
    out.push_back({std::string(), t.id});
    done = i = e;
  }
  emit_text(s.size());
}

}  // namespace tessera::model::tok
