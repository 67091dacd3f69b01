// BPE model: vocab and ranked merges keyed by id pair -> (rank, new id),
// validated at load; words merged with a priority queue over a linked list of
// symbols (lowest rank first, leftmost on ties), as tokenizers/src/models/bpe/word.rs.
#include <queue>

#include "tessera/core/error.h"
#include "tessera/model/tokenizer_parts.h"

namespace tessera::model::tok {
namespace {

// Ids index a dense table; this bound keeps a corrupt file from asking for
// gigabytes. The largest real vocabularies are around 260k.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;
// Same bounds as HF's BPE cache: long words are rare and would bloat it.
constexpr size_t kCacheCapacity = 10000;
constexpr size_t kCacheMaxWordBytes = 256;

std::string optional_string(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return {};
  if (!j[key].is_string()) throw_error<TokenizerError>("{}: '{}' must be a string", where, key);
  return j[key].get<std::string>();
}

}  // namespace

BpeModel::BpeModel(const json& model, const std::string& where) {
  const std::string type = model.contains("type") ? type_of(model, where) : "BPE";
  if (type != "BPE")
    throw_error<TokenizerError>("{}: unsupported model type '{}' (supported: BPE)", where, type);
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    throw_error<TokenizerError>("{}: BPE dropout is not supported (encoding must be deterministic)",
                                where);
  if (flag(model, "byte_fallback", false, where))
    throw_error<TokenizerError>("{}: byte_fallback BPE is not supported", where);
  fuse_unk_ = flag(model, "fuse_unk", false, where);
  ignore_merges_ = flag(model, "ignore_merges", false, where);
  prefix_ = optional_string(model, "continuing_subword_prefix", where);
  suffix_ = optional_string(model, "end_of_word_suffix", where);
  load_vocab(field(model, "vocab", where), where + ".vocab");
  load_merges(field(model, "merges", where), where + ".merges");
  if (prefix_.empty() && suffix_.empty()) {
    char_ids_.assign(kCharTable, -1);
    std::string ch;
    for (char32_t cp = 0; cp < kCharTable; ++cp) {
      ch.clear();
      append_utf8(ch, cp);
      if (auto id = token_to_id(ch)) char_ids_[cp] = *id;
    }
  }
  std::string unk = optional_string(model, "unk_token", where);
  if (!unk.empty()) {
    auto id = token_to_id(unk);
    if (!id) throw_error<TokenizerError>("{}: unk_token '{}' is not in the vocab", where, unk);
    unk_id_ = *id;
  }
}

void BpeModel::load_vocab(const json& vocab, const std::string& where) {
  if (!vocab.is_object()) throw_error<TokenizerError>("{}: must be an object token -> id", where);
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer())
      throw_error<TokenizerError>("{}: id of token '{}' is not an integer", where, it.key());
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > kMaxTokenId)
      throw_error<TokenizerError>("{}: id {} of token '{}' is outside [0, {}]", where, id,
                                  it.key(), kMaxTokenId);
    if (static_cast<size_t>(id) >= tokens_.size()) {
      tokens_.resize(static_cast<size_t>(id) + 1);
      has_id_.resize(static_cast<size_t>(id) + 1, false);
    }
    if (has_id_[static_cast<size_t>(id)])
      throw_error<TokenizerError>("{}: duplicate id {} (tokens '{}' and '{}')", where, id,
                                  tokens_[static_cast<size_t>(id)], it.key());
    has_id_[static_cast<size_t>(id)] = true;
    tokens_[static_cast<size_t>(id)] = it.key();
    vocab_.emplace(it.key(), static_cast<int32_t>(id));
  }
}

void BpeModel::load_merges(const json& merges, const std::string& where) {
  if (!merges.is_array()) throw_error<TokenizerError>("{}: must be an array", where);
  size_t cap = 16;
  while (cap < 2 * merges.size()) cap *= 2;
  merge_table_.assign(cap, MergeSlot{});
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string a, b;
    if (m.is_string()) {  // legacy "a b"
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        throw_error<TokenizerError>("{}[{}]: merge '{}' is not two tokens separated by one space",
                                    where, rank, s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      throw_error<TokenizerError>("{}[{}]: merge must be \"a b\" or [\"a\", \"b\"], got {}", where,
                                  rank, m.dump());
    }
    auto ia = token_to_id(a), ib = token_to_id(b);
    if (!ia || !ib)
      throw_error<TokenizerError>("{}[{}]: merge '{} {}' names unknown token '{}'", where, rank, a,
                                  b, ia ? b : a);
    std::string_view tail = b;
    if (!prefix_.empty() && tail.starts_with(prefix_)) tail.remove_prefix(prefix_.size());
    std::string merged = a + std::string(tail);
    auto inew = token_to_id(merged);
    if (!inew)
      throw_error<TokenizerError>("{}[{}]: merge '{} {}' produces '{}', which is not in the vocab",
                                  where, rank, a, b, merged);
    MergeSlot& slot = merge_slot(pair_key(*ia, *ib));
    if (slot.key != kEmptyKey)
      throw_error<TokenizerError>("{}[{}]: merge '{} {}' repeats merge {}", where, rank, a, b,
                                  slot.rank);
    slot = {pair_key(*ia, *ib), static_cast<int32_t>(rank), *inew};
    ++merge_count_;
  }
}

// The slot holding key, or the empty slot where it belongs (linear probing;
// the table is at most half full, so a probe sequence always ends).
BpeModel::MergeSlot& BpeModel::merge_slot(uint64_t key) {
  return const_cast<MergeSlot&>(*find_merge(static_cast<int32_t>(key >> 32),
                                            static_cast<int32_t>(key & 0xffffffffu)));
}

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t a, int32_t b) const {
  const uint64_t key = pair_key(a, b);
  uint64_t h = key;  // splitmix64 finaliser: ids are small and dense
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  h ^= h >> 31;
  const size_t mask = merge_table_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask)
    if (merge_table_[i].key == key || merge_table_[i].key == kEmptyKey) return &merge_table_[i];
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !has_id_[static_cast<size_t>(id)])
    return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity)
      cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
  }
}

std::vector<int32_t> BpeModel::initial_symbols(std::string_view word) const {
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  int32_t pending_unk = -1;  // an unk not yet emitted (fuse_unk may extend it)
  std::string buf;
  for (size_t i = 0; i < word.size();) {
    const size_t b = i;
    const char32_t cp = next_code_point(word, i);
    if (cp < char_ids_.size() && char_ids_[cp] >= 0) {
      if (pending_unk >= 0) ids.push_back(pending_unk);
      pending_unk = -1;
      ids.push_back(char_ids_[cp]);
      continue;
    }
    std::string_view ch = word.substr(b, i - b);
    if ((b > 0 && !prefix_.empty()) || (i >= word.size() && !suffix_.empty())) {
      buf.assign(b > 0 ? prefix_ : std::string());
      buf.append(ch);
      if (i >= word.size()) buf += suffix_;
      ch = buf;
    }
    if (auto id = token_to_id(ch)) {
      if (pending_unk >= 0) ids.push_back(pending_unk);
      pending_unk = -1;
      ids.push_back(*id);
    } else if (unk_id_) {
      // Without fuse_unk every unknown char is its own unk; with it, a run is one.
      if (pending_unk >= 0 && !fuse_unk_) ids.push_back(pending_unk);
      pending_unk = *unk_id_;
    }
    // With no unk token HF drops the char; byte-level vocabularies cover all
    // 256 byte chars, so this only happens with hand-made vocabularies.
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);
  return ids;
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<int32_t> sym = initial_symbols(word);
  const int n = static_cast<int>(sym.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> queue;
  auto push_pair = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    const MergeSlot* m = find_merge(sym[pos], sym[next[pos]]);
    if (m->key != kEmptyKey) queue.push({m->rank, pos, m->new_id});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    Cand top = queue.top();
    queue.pop();
    // Entries go stale when a neighbour merged first; HF's check is that the
    // pair at pos still merges into the same new id.
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    const MergeSlot* m = find_merge(sym[top.pos], sym[right]);
    if (m->key == kEmptyKey || m->new_id != top.new_id) continue;
    sym[top.pos] = top.new_id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push_pair(prev[top.pos]);
    push_pair(top.pos);
  }
  for (int i = 0; i < n; ++i)
    if (alive[i]) out.push_back(sym[i]);
}

}  // namespace tessera::model::tok
