#pragma once
// The canonical activation layout a builder can be asked for (TileOptions
// kRowMajorTile = 1): every streamed activation input and the output each in
// ONE host buffer holding plain row-major bf16 of the logical tensor, no
// padding, so one design's output bytes are the next design's input bytes as
// they are (the compiler's align-layouts pass). The blocking is done by the
// shim DMA's access patterns in the runtime sequence instead of by pack();
// ragged edges are covered by re-reading (and rewriting identically) the last
// whole block rather than by padding. A builder that cannot do this for a
// shape throws LimitError naming it; builders that do not know the key reject
// it (check_tile_keys). Builders that know it: linear (gemm), and the
// row-wise rmsnorm, bias_add, residual_add and silu_mul.
namespace tessera::kernels {

inline constexpr const char* kRowMajorTile = "rowmajor";
// The output alone in the canonical layout, inputs as the builder blocks them
// (a gemm whose row-major x would cost more DMA bursts than its re-layout;
// the row-wise builders take it as kRowMajorTile).
inline constexpr const char* kRowMajorOutTile = "rowmajor_out";

}  // namespace tessera::kernels
