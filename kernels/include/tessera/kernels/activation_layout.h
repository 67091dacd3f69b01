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
// The output of a row-wise op (inputs row-major) written in the blocked x
// layout of the gemm that reads it (kernels/builders/rowwise.h GemmXLayout):
// the gemm's m, k and rows. The producer pays the short runs once; the gemm
// keeps streaming whole blocks on every N block it re-reads x for.
inline constexpr const char* kGemmXM = "gemm_x_m";
inline constexpr const char* kGemmXK = "gemm_x_k";
inline constexpr const char* kGemmXRows = "gemm_x_rows";

}  // namespace tessera::kernels
