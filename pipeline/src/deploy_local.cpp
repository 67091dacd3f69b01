// The local (conditional) gates of phases 2 and 6 (local_gate.h): every op of
// an executor result against the oracle op on the NPU's own inputs, with the
// source weights and the oracle's host values as the reference's fixed inputs.
#include "deploy_internal.h"
#include "tessera/core/error.h"
#include "tessera/model/mapped_pages.h"
#include "tessera/model/tensor_table.h"
#include "tessera/pipeline/local_gate.h"

namespace tessera::pipeline::detail {

std::vector<LocalCheck> local_checks_on(Context& ctx, const compiler::Graph& g, const runtime::Values& npu,
                                        const runtime::Values& host, int64_t last_row, WeightStore* store) {
  const model::Weights& w = ctx.weights();
  const std::vector<model::TensorSpec> specs = model::tensor_specs(ctx.config);
  const FixedValue fixed = [&](const compiler::ValueRef& ref) -> std::vector<float> {
    if (ref.kind == compiler::ValueKind::host) {
      auto it = host.find(ref.str());
      TESSERA_CHECK(it != host.end(), "local gate: no reference host value {}", ref.str());
      return it->second;
    }
    for (const auto& s : specs)
      if (s.layer == ref.layer && model::role_name(s.role) == ref.name) {
        const Tensor& t = w.get(s.name);
        std::vector<float> out = t.to_f32_vector();  // one FP32 copy, converted in place
        // Read once per call (or once into the store): its mapped pages
        // would otherwise stay resident beside the FP32 copy, the whole
        // source model by the last layer.
        model::release_mapped_pages(t);
        return out;
      }
    throw_error<InternalError>("local gate: no source weight {} in {}", ref.str(), ctx.config.name);
  };
  return local_checks(g, npu, fixed, last_row, store);
}

int64_t add_local_checks(Context& ctx, const compiler::Graph& g, const runtime::Values& npu,
                      const std::vector<int32_t>& tokens, const std::string& prefix, PhaseResult& r,
                      int64_t last_row) {
  // The host values an honest caller supplies for these tokens at P = 0.
  TESSERA_CHECK(g.past == 0 && static_cast<int64_t>(tokens.size()) == g.seq,
                "local gate: {} tokens for a graph of S={} P={}", tokens.size(), g.seq, g.past);
  int64_t n = 0;
  for (const LocalCheck& c : local_checks_on(ctx, g, npu, host_inputs(ctx.config, tokens), last_row, nullptr)) {
    r.checks.push_back(make_check(prefix + c.value, c.metrics, c.threshold));
    ++n;
  }
  return n;
}

}  // namespace tessera::pipeline::detail
