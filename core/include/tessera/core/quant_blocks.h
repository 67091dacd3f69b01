#pragma once
// ggml's 32-element block formats that tessera keeps as they are in a GGUF
// file (Tensor dtypes q4_0, q4_1, q8_0): the blocks run along a tensor's last
// dimension, so a row of a [rows, cols] matrix is cols / 32 whole blocks.
// Decoding follows gguf-py's quants.py exactly (each value formed with the same
// f32 operations in the same order; d is an f16 and q at most 8 bits, so d * q
// is exact and `d * q + m` rounds once, fused or not), so a kernel that
// decodes a block in cache computes with the same f32 weights as one that
// reads the whole tensor decoded.
#include <cstddef>
#include <cstdint>

namespace tessera {

enum class DType;

inline constexpr int64_t kQuantBlock = 32;

// Elements per block: kQuantBlock for the block formats, 1 for the others.
int64_t dtype_block_elems(DType d);
// Bytes per block (per element for the scalar dtypes).
size_t dtype_block_bytes(DType d);
bool dtype_is_block(DType d);

// Decodes `blocks` consecutive blocks of `d` (a block format) into
// blocks * kQuantBlock floats.
void dequantize_blocks(DType d, const std::byte* src, int64_t blocks, float* dst);

// The f16 scale words of one block at their byte offsets (d, and m for
// q4_1): every other field is an integer, so a block decodes to finite values
// exactly when these are finite. Returns how many (1 or 2).
int block_scale_offsets(DType d, size_t (&offsets)[2]);

namespace detail {
// The decoder for CPUs without AVX2 (dequantize_blocks picks the AVX2 one
// where it can), for its test on every machine.
void dequantize_blocks_portable(DType d, const std::byte* src, int64_t blocks, float* dst);
}  // namespace detail

}  // namespace tessera
