#include "tessera/model/weights.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/core/quant_blocks.h"
#include "tessera/core/threads.h"

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

// Index of the first element of [data, data + n) whose exponent bits are all
// ones (Inf or NaN), or n. T is the storage word, `exp` its exponent mask.
template <class T>
size_t first_non_finite(const std::byte* data, size_t n, T exp) {
  for (size_t i = 0; i < n; ++i) {
    T w;
    std::memcpy(&w, data + i * sizeof(T), sizeof(T));
    if ((w & exp) == exp) return i;
  }
  return n;
}

// A block format's values are finite exactly when its f16 scale words are
// (the rest are integers): the first element of the first block whose scale
// is not, or `end`.
size_t first_non_finite_block(const Tensor& t, size_t begin, size_t end) {
  size_t at[2];
  const int scales = block_scale_offsets(t.dtype(), at);
  const size_t bytes = dtype_block_bytes(t.dtype()), per = static_cast<size_t>(kQuantBlock);
  for (size_t b = begin / per; b * per < end; ++b)
    for (int j = 0; j < scales; ++j)
      if (first_non_finite<uint16_t>(t.bytes() + b * bytes + at[j], 1, uint16_t{0x7c00}) == 0)
        return std::max(begin, b * per);
  return end;
}

// The non-finite f16 scale of the block holding element i, as bits.
uint16_t block_scale_bits(const Tensor& t, size_t i) {
  size_t at[2];
  const int scales = block_scale_offsets(t.dtype(), at);
  const std::byte* block = t.bytes() + i / static_cast<size_t>(kQuantBlock) * dtype_block_bytes(t.dtype());
  uint16_t h = 0;
  for (int j = 0; j < scales; ++j) {
    std::memcpy(&h, block + at[j], 2);
    if ((h & 0x7c00) == 0x7c00) break;
  }
  return h;
}

size_t first_non_finite(const Tensor& t, size_t begin, size_t end) {
  if (dtype_is_block(t.dtype())) return first_non_finite_block(t, begin, end);
  const std::byte* p = t.bytes() + begin * dtype_size(t.dtype());
  const size_t n = end - begin;
  switch (t.dtype()) {
    case DType::f32: return begin + first_non_finite<uint32_t>(p, n, 0x7f800000u);
    case DType::bf16: return begin + first_non_finite<uint16_t>(p, n, uint16_t{0x7f80});
    case DType::f16: return begin + first_non_finite<uint16_t>(p, n, uint16_t{0x7c00});
    case DType::q4_0:
    case DType::q4_1:
    case DType::q8_0: break;  // above
  }
  return end;
}

// "NaN", "+Inf" or "-Inf" for element i, known to be non-finite.
std::string non_finite_name(const Tensor& t, size_t i) {
  if (dtype_is_block(t.dtype())) {
    const uint16_t h = block_scale_bits(t, i);
    return fmt::format("{} (its block's f16 scale)", (h & 0x3ff) ? "NaN" : (h >> 15) ? "-Inf" : "+Inf");
  }
  const size_t w = dtype_size(t.dtype());
  uint32_t bits = 0;
  std::memcpy(&bits, t.bytes() + i * w, w);  // little-endian: the low bytes of `bits`
  const uint32_t mantissa = t.dtype() == DType::f32 ? 0x7fffffu : t.dtype() == DType::bf16 ? 0x7fu : 0x3ffu;
  if (bits & mantissa) return "NaN";
  return bits >> (8 * w - 1) ? "-Inf" : "+Inf";
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

void Weights::check_finite(const std::string& where) const {
  for (const auto& [name, tensor] : tensors_) {
    const Tensor& t = tensor;  // a plain reference: lambdas may not capture structured bindings before C++20 clang 16
    const auto n = static_cast<size_t>(t.numel());
    // Chunks scanned in parallel; the smallest bad index wins, so the report is deterministic.
    constexpr size_t kChunk = size_t{1} << 20;
    const size_t chunks = (n + kChunk - 1) / kChunk;
    std::atomic<size_t> first{std::numeric_limits<size_t>::max()};
    parallel_for(chunks, [&](size_t c0, size_t c1) {
      for (size_t c = c0; c < c1; ++c) {
        const size_t end = std::min(n, (c + 1) * kChunk);
        const size_t i = first_non_finite(t, c * kChunk, end);
        if (i == end) continue;
        size_t cur = first.load();
        while (i < cur && !first.compare_exchange_weak(cur, i)) {
        }
        break;
      }
    });
    const size_t i = first.load();
    if (i == std::numeric_limits<size_t>::max()) continue;
    Shape idx(t.shape().size());
    size_t rest = i;
    for (size_t d = idx.size(); d-- > 0;) {
      const auto dim = static_cast<size_t>(t.shape()[d]);
      idx[d] = static_cast<int64_t>(rest % dim);
      rest /= dim;
    }
    throw_error<TensorError>("{}: tensor '{}' element {} (flat index {}) is {}: weights must be finite", where,
                             name, shape_str(idx), i, non_finite_name(t, i));
  }
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
