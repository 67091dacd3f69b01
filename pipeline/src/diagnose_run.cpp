// Where deploy runs the diagnosers (diagnose.h): on phase 1's failed kernels
// as they ran, and on a failed phase-2 / phase-3 run by isolating the first
// node whose NPU output disagrees with the oracle op applied to the NPU's own
// inputs (a tap that fails downstream of it is its consequence, not a cause).
#include <fmt/format.h>

#include "deploy_internal.h"
#include "diagnose_run.h"
#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/model/tensor_table.h"
#include "tessera/oracle/rope.h"
#include "tessera/pipeline/reference_ops.h"
#include "tessera/pipeline/thresholds.h"

namespace tessera::pipeline::detail {

namespace {

bool failed_kernel(const KernelResult& k) {
  return k.status == KernelStatus::fail || k.status == KernelStatus::build_error ||
         k.status == KernelStatus::run_error;
}

// The source weight the NPU's packed copy was made from, rounded to bf16 as packed.
std::vector<float> source_weight(Context& ctx, const compiler::ValueRef& r) {
  for (const auto& s : model::tensor_specs(ctx.config)) {
    if (s.layer != r.layer || model::role_name(s.role) != r.name) continue;
    const Tensor& t = ctx.weights().get(s.name);
    std::vector<float> out = t.to_f32_vector();
    round_bf16_inplace(out);
    return out;
  }
  throw_error<InternalError>("diagnosis: no source weight {} in {}", r.str(), ctx.config.name);
}

// Every other weight of layer `r.layer` with the element count of `r`'s, bf16 as packed.
std::vector<std::pair<std::string, std::vector<float>>> same_size_weights(Context& ctx, const compiler::ValueRef& r,
                                                                           size_t numel) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& s : model::tensor_specs(ctx.config)) {
    if (s.layer != r.layer || model::role_name(s.role) == r.name) continue;
    const compiler::ValueRef other{compiler::ValueKind::weight, model::role_name(s.role), s.layer, false};
    if (static_cast<size_t>(ctx.weights().get(s.name).numel()) != numel) continue;
    out.emplace_back(other.str(), source_weight(ctx, other));
  }
  return out;
}

// The inputs node `n` read in this run, or nullopt when one was not kept
// (a value fused away) or does not have the size the op reads.
// A last_row input is recorded in `c` (OpCase::row_view_*) with the value it
// was cut from.
std::optional<std::vector<std::vector<float>>> node_inputs(Context& ctx, const compiler::Graph& g,
                                                           const compiler::Node& n, const runtime::Values& npu,
                                                           const runtime::Values& host, int64_t last_row,
                                                           OpCase& c) {
  std::vector<std::vector<float>> in;
  const std::vector<int64_t> want = reference_input_sizes(n.shape);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const compiler::ValueRef& r = n.inputs[i];
    if (r.kind == compiler::ValueKind::weight) {
      in.push_back(source_weight(ctx, r));
    } else {
      compiler::ValueRef whole = r;
      whole.last_row = false;
      const runtime::Values& src = r.kind == compiler::ValueKind::host ? host : npu;
      auto it = src.find(whole.str());
      if (it == src.end()) return std::nullopt;
      if (!r.last_row || g.seq <= 0) {
        in.push_back(it->second);
      } else {  // row last_row (-1: the last) of [S, width], as the executor takes it
        const size_t width = it->second.size() / static_cast<size_t>(g.seq);
        const size_t row = last_row < 0 ? static_cast<size_t>(g.seq) - 1 : static_cast<size_t>(last_row);
        if (row >= static_cast<size_t>(g.seq)) return std::nullopt;
        c.row_view_input = static_cast<int64_t>(i);
        c.row_view_source = it->second;
        c.row_view_row = static_cast<int64_t>(row);
        in.emplace_back(it->second.begin() + static_cast<std::ptrdiff_t>(row * width),
                        it->second.begin() + static_cast<std::ptrdiff_t>((row + 1) * width));
      }
    }
    if (i >= want.size() || static_cast<int64_t>(in.back().size()) != want[i]) return std::nullopt;
  }
  return in;
}

bool disagrees(const OpCase& c) {
  Threshold t = kernel_threshold(c.shape);
  const int64_t hd = c.shape.dims.count("head_dim") ? c.shape.dim("head_dim") : 0;
  t.noise.row_width = stat_row_width(c.shape.op, hd, c.npu.size(), c.rows);
  const std::vector<std::span<const float>> spans(c.inputs.begin(), c.inputs.end());
  return !failed_metrics(compare(reference_op(c.shape, spans), c.npu, t.noise), t).empty();
}

}  // namespace

std::function<void(const KernelFailure&)> phase1_diagnoser(Context& ctx, std::vector<Diagnosis>& out) {
  return [&ctx, &out](const KernelFailure& f) {
    OpCase c;
    c.where = fmt::format("phase 1 {} {}", f.rows == 1 ? "decode" : "prefill", f.result.node);
    c.shape = f.shape;
    if (f.inputs) c.inputs = *f.inputs;
    c.activation = f.activation;
    if (f.npu) c.npu = *f.npu;
    c.error = f.error;
    c.rows = f.rows;
    c.past = f.past;
    c.config = &ctx.config;
    c.spec = ctx.opts.spec;
    out.push_back(diagnose(c));
  };
}

void attach_phase1(Context& ctx, PhaseResult& r, const Phase1Report& rep, const std::vector<Diagnosis>& ds) {
  size_t next = 0;
  for (size_t i = 0; i < rep.results.size() && i < r.checks.size(); ++i) {
    if (!failed_kernel(rep.results[i]) || next >= ds.size()) continue;
    const Diagnosis& d = ds[next++];
    r.checks[i].message += fmt::format(" | likely cause: {} [{}]", d.cause, d.diagnoser);
    ctx.issues.push_back("diagnosis, " + d.line());
    r.details["diagnoses"].push_back(d.to_json());
  }
}

std::optional<Diagnosis> diagnose_run(Context& ctx, const compiler::Graph& g, const runtime::Values& npu,
                                      const runtime::Values& host, const std::string& phase, int64_t last_row) {
  for (const compiler::Node& n : g.nodes) {
    if (n.shape.op == "argmax") continue;  // ties are judged on the logits, not in isolation
    auto out = npu.find(n.output.str());
    if (out == npu.end() || static_cast<int64_t>(out->second.size()) != reference_output_size(n.shape)) continue;
    OpCase c;
    auto in = node_inputs(ctx, g, n, npu, host, last_row, c);
    if (!in) continue;
    c.where = fmt::format("{} node {}", phase, n.output.str());
    c.shape = n.shape;
    c.inputs = std::move(*in);
    for (const auto& r : n.inputs) c.activation.push_back(r.kind == compiler::ValueKind::activation);
    c.npu = out->second;
    c.rows = g.seq;
    c.past = g.past;
    c.config = &ctx.config;
    c.spec = ctx.opts.spec;
    if (!disagrees(c)) continue;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      c.other_weights.push_back(n.inputs[i].kind == compiler::ValueKind::weight
                                    ? same_size_weights(ctx, n.inputs[i], c.inputs[i].size())
                                    : std::vector<std::pair<std::string, std::vector<float>>>{});
    return diagnose(c);
  }
  return std::nullopt;
}

std::optional<Diagnosis> diagnose_decode(Context& ctx) {
  const OracleRun& orc = ctx.oracle();
  if (orc.continuation.empty()) return std::nullopt;
  runtime::Executor exec(ctx.opts.spec, *ctx.packed());
  const runtime::ExecResult pre = exec.run(ctx.prefill_plan(), host_inputs(ctx.config, orc.prompt));
  const compiler::Plan& dec = ctx.decode_plan();
  const auto P = static_cast<int64_t>(orc.prompt.size());
  runtime::Values host;
  host["host:token_ids"] = {static_cast<float>(orc.continuation[0])};
  const oracle::RopeTable rope = oracle::rope_table(ctx.config, P, 1);
  host["host:rope_cos"] = rope.cos;
  host["host:rope_sin"] = rope.sin;
  for (int64_t l = 0; l < ctx.config.num_layers; ++l)
    for (const char* kv : {"k_cache", "v_cache"}) {
      std::vector<float> cache = npu_value(pre, fmt::format("L{}.{}", l, kv));
      cache.resize(static_cast<size_t>((P + 1) * ctx.config.kv_dim()), 0.0f);  // the decode row, not yet written
      host[fmt::format("host:L{}.{}_in", l, kv)] = std::move(cache);
    }
  const runtime::ExecResult step = exec.run(dec, host);
  return diagnose_run(ctx, dec.graph, step.values, host, "phase 6 decode step");
}

void attach(Context& ctx, PhaseResult& r, const std::function<std::optional<Diagnosis>()>& run) {
  std::optional<Diagnosis> d;
  try {
    d = run();
  } catch (const Error& e) {  // the diagnosis is advice: the gate's verdict stands without it
    ctx.issues.push_back(fmt::format("diagnosis of phase {} not run: {}", r.phase, e.what()));
    return;
  }
  Diagnosis u;
  if (!d) {
    u.where = fmt::format("phase {}", r.phase);
    u.diagnoser = "unknown";
    u.cause = "unknown: every node agrees with its oracle op on its own inputs (an error accumulated along "
              "the path, or in a value no node exposes)";
    u.evidence = "no node to run a hypothesis on";
  }
  const Diagnosis& x = d ? *d : u;
  for (GateCheck& c : r.checks) {
    if (c.passed) continue;
    c.message += fmt::format(" | likely cause: {} [{}]", x.cause, x.diagnoser);
    break;
  }
  ctx.issues.push_back("diagnosis, " + x.line());
  r.details["diagnoses"].push_back(x.to_json());
}

}  // namespace tessera::pipeline::detail
