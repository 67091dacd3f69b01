#include "tessera/core/tensor.h"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/core/error.h"
#include "tessera/core/quant_blocks.h"

namespace tessera {

size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::q4_0:
    case DType::q4_1:
    case DType::q8_0:
      throw_error<InternalError>("dtype_size: {} is a block format (dtype_block_bytes)", dtype_name(d));
  }
  throw InternalError("dtype_size: unknown dtype");
}

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::q4_0: return "Q4_0";
    case DType::q4_1: return "Q4_1";
    case DType::q8_0: return "Q8_0";
  }
  throw InternalError("dtype_name: unknown dtype");
}

DType dtype_from_name(std::string_view s) {
  if (s == "F32") return DType::f32;
  if (s == "BF16") return DType::bf16;
  if (s == "F16") return DType::f16;
  throw_error<InputError>("unsupported dtype '{}' (supported: F32, BF16, F16)", s);
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw_error<InputError>("negative dimension in shape {}", shape_str(s));
    if (d != 0 && n > INT64_MAX / d)
      throw_error<InputError>("shape {} overflows int64", shape_str(s));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

namespace {
void check_blocks(DType dtype, const Shape& shape) {
  if (!dtype_is_block(dtype)) return;
  if (shape.empty() || shape.back() % kQuantBlock != 0)
    throw_error<InputError>("a {} tensor of shape {} needs a last dimension of whole {}-element "
                            "blocks", dtype_name(dtype), shape_str(shape), kQuantBlock);
}

size_t bytes_of(DType dtype, const Shape& shape) {
  if (!dtype_is_block(dtype)) return static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return static_cast<size_t>(shape_numel(shape) / kQuantBlock) * dtype_block_bytes(dtype);
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  check_blocks(dtype_, shape_);
  nbytes_ = bytes_of(dtype_, shape_);
  size_t n = nbytes_;
  auto buf = std::shared_ptr<std::byte[]>(new std::byte[n == 0 ? 1 : n]());
  data_ = buf.get();
  owner_ = std::shared_ptr<const void>(buf, buf.get());
  owning_ = true;
}

Tensor Tensor::view(DType dtype, Shape shape, const std::byte* data,
                    std::shared_ptr<const void> keepalive) {
  check_blocks(dtype, shape);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.nbytes_ = bytes_of(dtype, t.shape_);
  t.data_ = const_cast<std::byte*>(data);  // never written: owning_ stays false
  t.owner_ = std::move(keepalive);
  return t;
}

Tensor Tensor::from_f32(Shape shape, std::span<const float> values) {
  Tensor t(DType::f32, std::move(shape));
  TESSERA_CHECK(static_cast<size_t>(t.numel()) == values.size(),
                "from_f32: {} values for shape {}", values.size(), shape_str(t.shape()));
  std::memcpy(t.data_, values.data(), values.size_bytes());
  return t;
}

std::byte* Tensor::mutable_bytes() {
  TESSERA_CHECK(owning_, "mutable access to a read-only tensor view of shape {}",
                shape_str(shape_));
  return data_;
}

Tensor Tensor::to(DType target) const {
  if (dtype_is_block(target) && target != dtype_)
    throw_error<UnsupportedError>("tensor of shape {}: no conversion from {} into the block "
                                  "format {}", shape_str(shape_), dtype_name(dtype_), dtype_name(target));
  Tensor out(target, shape_);
  if (target == dtype_) {
    std::memcpy(out.data_, data_, nbytes());
    return out;
  }
  if (target == DType::f32) {  // straight into out: no FP32 temporary of the whole tensor
    auto o = out.as_mut<float>();
    if (dtype_ == DType::bf16) bf16_to_f32(as<bf16>(), o);
    else if (dtype_ == DType::f16) f16_to_f32(as<uint16_t>(), o);
    else dequantize_blocks(dtype_, data_, numel() / kQuantBlock, o.data());
    return out;
  }
  std::vector<float> f = to_f32_vector();
  switch (target) {
    case DType::f32: break;
    case DType::bf16: f32_to_bf16(f, out.as_mut<bf16>()); break;
    case DType::f16: {
      auto o = out.as_mut<uint16_t>();
      for (size_t i = 0; i < f.size(); ++i) o[i] = f32_to_f16(f[i]);
      break;
    }
    case DType::q4_0:
    case DType::q4_1:
    case DType::q8_0: break;  // refused above
  }
  return out;
}

std::vector<float> Tensor::to_f32_vector() const {
  std::vector<float> f(static_cast<size_t>(numel()));
  switch (dtype_) {
    case DType::f32: std::memcpy(f.data(), data_, nbytes()); break;
    case DType::bf16: bf16_to_f32(as<bf16>(), f); break;
    case DType::f16: f16_to_f32(as<uint16_t>(), f); break;
    case DType::q4_0:
    case DType::q4_1:
    case DType::q8_0: dequantize_blocks(dtype_, data_, numel() / kQuantBlock, f.data()); break;
  }
  return f;
}

}  // namespace tessera
