#include "tessera/model/weights.h"

#include <set>

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera::model {
namespace {

// "a, b, c (and 7 more)": enough names to act on without flooding one line.
std::string name_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 3;
  std::string s;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kShown) s += fmt::format(" (and {} more)", names.size() - kShown);
  return s;
}

}  // namespace

void Weights::add(const std::string& name, Tensor t) {
  if (!tensors_.emplace(name, std::move(t)).second)
    throw_error<TensorError>("duplicate tensor '{}'", name);
}

bool Weights::contains(const std::string& name) const { return tensors_.count(name) != 0; }

const Tensor& Weights::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw_error<TensorError>("missing tensor '{}'", name);
  return it->second;
}

const Tensor& Weights::get(const ModelConfig& c, WeightRole role, int layer) const {
  return get(tensor_name(c, role, layer));
}

std::vector<std::string> Weights::names() const {
  std::vector<std::string> v;
  v.reserve(tensors_.size());
  for (const auto& [n, t] : tensors_) v.push_back(n);
  return v;
}

// A checkpoint with tied embeddings may still carry lm_head.weight (some
// exporters write it); transformers ties it to the embedding after loading, so
// the stored copy is never used. We accept it when its shape fits and, like
// transformers, ignore it: tensor_name(lm_head) resolves to the embedding.
void Weights::check_against(const ModelConfig& c) const {
  std::vector<std::string> missing, unexpected;
  std::set<std::string> expected;
  for (const auto& s : tensor_specs(c)) {
    expected.insert(s.name);
    auto it = tensors_.find(s.name);
    if (it == tensors_.end()) {
      missing.push_back(s.name);
    } else if (it->second.shape() != s.shape) {
      throw_error<TensorError>("{}: tensor '{}' has shape {}, expected {}", c.name, s.name,
                               shape_str(it->second.shape()), shape_str(s.shape));
    }
  }
  if (!missing.empty())
    throw_error<TensorError>("{}: {} missing tensor(s): {}", c.name, missing.size(),
                             name_list(missing));
  for (const auto& [n, t] : tensors_) {
    if (expected.count(n)) continue;
    if (c.tie_word_embeddings && n == "lm_head.weight" &&
        t.shape() == Shape{c.vocab_size, c.hidden_size})
      continue;
    unexpected.push_back(n);
  }
  if (!unexpected.empty())
    throw_error<TensorError>("{}: {} unexpected tensor(s): {}", c.name, unexpected.size(),
                             name_list(unexpected));
}

}  // namespace tessera::model
