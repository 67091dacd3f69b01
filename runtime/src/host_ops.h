#pragma once
// The host steps of the default plan style (compiler/plan.h): the three pure
// data-movement ops the CPU next to the NPU does itself. Each must give the
// NPU op's result bit for bit (tests/runtime/executor_test.cpp checks them
// against kernels::run_op), so they follow the same bf16 rules: values are
// rounded to bf16 (RNE) exactly where the design's pack() rounds them.
#include <cstddef>
#include <span>
#include <vector>

#include "tessera/kernels/op_builder.h"

namespace tessera::runtime {

// x[M, H] = table[ids[m], :]; `table` holds the packed bf16 row-major [V, H]
// bytes the embedding design reads (its "table" host buffer). Throws
// InputError for an id that is not an integer in [0, V).
std::vector<float> host_embedding(const kernels::OpShape& shape, std::span<const float> ids,
                                  std::span<const std::byte> table);

// cache[T, kv_dim] with rows pos..pos+M-1 replaced by `rows` [M, kv_dim]; every
// value rounded to bf16 as the kv_append design's pack does.
std::vector<float> host_kv_append(const kernels::OpShape& shape, std::span<const float> rows,
                                  std::span<const float> cache);

// ids[M] (as floats): first index of the max of each bf16-rounded row of
// logits [M, V] (the NPU's top-k merge resolves ties to the smaller index).
std::vector<float> host_argmax(const kernels::OpShape& shape, std::span<const float> logits);


}  // namespace tessera::runtime
