#pragma once
// A dense row-major tensor that either owns its bytes or views bytes owned by
// someone else (an mmap'd safetensors file), kept alive by a shared handle.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/bf16.h"

namespace tessera {

// q4_0 / q4_1 / q8_0: ggml's 32-element blocks along the last dimension, kept
// as a GGUF file holds them (core/quant_blocks.h); to() / to_f32_vector()
// decode them, and as<T>() views their raw block bytes.
enum class DType { f32, bf16, f16, q4_0, q4_1, q8_0 };

// Bytes per element; InternalError for a block format (dtype_block_bytes).
size_t dtype_size(DType d);
// "F32", "BF16", "F16" (safetensors spelling); "Q4_0", "Q4_1", "Q8_0" (ggml's).
std::string_view dtype_name(DType d);
DType dtype_from_name(std::string_view s);  // safetensors dtypes only; throws InputError naming s

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2048, 8192]"

class Tensor {
 public:
  Tensor() = default;
  // Owning, zero-initialised. A block dtype needs a last dimension that is a
  // whole number of blocks (InputError otherwise), as does view().
  Tensor(DType dtype, Shape shape);
  // Non-owning view; `keepalive` holds whatever owns `data`.
  static Tensor view(DType dtype, Shape shape, const std::byte* data,
                     std::shared_ptr<const void> keepalive);
  static Tensor from_f32(Shape shape, std::span<const float> values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return shape_numel(shape_); }
  // Computed once, at construction: the executor takes a view of every
  // weight buffer per launch per token, and each as<T>() asks for it.
  size_t nbytes() const { return nbytes_; }
  bool empty() const { return data_ == nullptr; }

  const std::byte* bytes() const { return data_; }
  // Mutable access is only legal on owning tensors (views are read-only maps).
  std::byte* mutable_bytes();

  template <class T> std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data_), nbytes() / sizeof(T)};
  }
  template <class T> std::span<T> as_mut() {
    return {reinterpret_cast<T*>(mutable_bytes()), nbytes() / sizeof(T)};
  }

  // Converted copy (exact for bf16/f16/block -> f32; RNE for f32 -> bf16/f16;
  // no conversion into a block format).
  Tensor to(DType target) const;
  std::vector<float> to_f32_vector() const;

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  size_t nbytes_ = 0;
  std::shared_ptr<const void> owner_;
  std::byte* data_ = nullptr;
  bool owning_ = false;
};

}  // namespace tessera
