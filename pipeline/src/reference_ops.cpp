// reference_ops.h over the table of operators (op_table.h).
#include "tessera/pipeline/reference_ops.h"

#include "tessera/core/error.h"
#include "tessera/pipeline/op_table.h"

namespace tessera::pipeline {

using kernels::OpShape;

namespace {

const OpDef& def(const OpShape& s) {
  const OpDef* d = find_op(s.op);
  if (d == nullptr) throw_error<UsageError>("no reference for op '{}'", s.op);
  return *d;
}

}  // namespace

std::vector<int64_t> reference_input_sizes(const OpShape& shape) { return def(shape).sizes(shape).in; }
int64_t reference_output_size(const OpShape& shape) { return def(shape).sizes(shape).out; }

std::vector<float> reference_op(const OpShape& shape,
                                const std::vector<std::span<const float>>& inputs) {
  const OpDef& d = def(shape);
  const OpSizes z = d.sizes(shape);
  if (inputs.size() != z.in.size())
    throw_error<UsageError>("{}: {} inputs given, the op takes {}", shape.key(), inputs.size(),
                            z.in.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (static_cast<int64_t>(inputs[i].size()) != z.in[i])
      throw_error<UsageError>("{}: input {} has {} values, the op needs {}", shape.key(), i,
                              inputs[i].size(), z.in[i]);
  return d.reference(shape, inputs);
}

}  // namespace tessera::pipeline
