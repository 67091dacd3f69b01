// Timing, bounds and renderings of the published-system styles
// (style_published.h).
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/compiler/graph.h"
#include "tessera/compiler/style_published.h"
#include "tessera/core/error.h"
#include "tessera/npu/timing.h"

namespace tessera::compiler {

const npu::DispatchTiming& TimingMemo::get(const npu::Design& d) {
  auto it = memo_.find(&d);
  if (it == memo_.end()) it = memo_.emplace(&d, npu::estimate_time(d, spec_)).first;
  return it->second;
}

StepTime time_step(const StyleStep& step, const npu::DeviceSpec& spec) {
  TimingMemo memo(spec);
  return time_step(step, memo);
}

StepTime time_step(const StyleStep& step, TimingMemo& memo) {
  const npu::DeviceSpec& spec = memo.spec();
  StepTime t;
  if (!step.npu) {
    const double bytes = static_cast<double>(step.host_bytes) / spec.host_bytes_per_second;
    const double flops = step.host_flops / spec.host_flops;
    t.seconds = spec.host_call_overhead_seconds + std::max(bytes, flops);
    t.bound = "host";
    return t;
  }
  std::map<std::string, double> part;
  part["overhead"] = spec.dispatch_overhead_seconds +
                     spec.reconfigure_seconds * static_cast<double>(step.launches.size() - 1);
  part["host"] = static_cast<double>(step.sync_bytes) / spec.host_sync_bytes_per_second +
                 static_cast<double>(step.copy_bytes) / spec.host_copy_bytes_per_second +
                 static_cast<double>(step.host_calls) * spec.host_call_overhead_seconds +
                 // Conversions stream contiguous arrays like the BO copies (not
                 // the strided numpy copies host_bytes_per_second describes).
                 static_cast<double>(step.convert_bytes) / spec.host_copy_bytes_per_second;
  for (const StyleLaunch& l : step.launches) {
    // The built op is a dispatch of its own: keep its launches, not its overhead.
    const npu::DispatchTiming& d = memo.get(l.op->design);
    part[d.bound] += d.total_seconds - d.overhead_seconds;
  }
  t.bound = "overhead";
  for (const auto& [name, secs] : part) {
    t.seconds += secs;
    if (secs > part[t.bound]) t.bound = name;
  }
  return t;
}

ModelBounds model_bounds(const model::ModelConfig& c, int64_t seq, const npu::DeviceSpec& spec) {
  ModelBounds b;
  double macs = 0;
  for (const Node& n : build_graph(c, seq, 0).nodes) {
    const auto& s = n.shape;
    if (s.op == "linear") macs += static_cast<double>(s.dim("M")) * s.dim("K") * s.dim("N");
    // Causal: query i sees i + 1 keys; q k^T and p v.
    if (s.op == "attention_prefill")
      macs += 2.0 * s.dim("heads") * s.dim("head_dim") * (seq * (seq + 1) / 2.0);
  }
  // Every weight a decode step reads once: the linears (LM head included) and
  // the norm vectors; the embedding table contributes one row.
  for (const Node& n : build_graph(c, 1, seq).nodes) {
    const auto& s = n.shape;
    if (s.op == "linear") b.decode_weight_bytes += 2.0 * s.dim("K") * s.dim("N");
    if (s.op == "rmsnorm") b.decode_weight_bytes += 2.0 * s.dim("H");
    if (s.op == "embedding") b.decode_weight_bytes += 2.0 * s.dim("H");
  }
  b.prefill_flops = 2 * macs;
  const double peak = spec.macs_per_cycle_bf16 * spec.compute_tiles() * spec.clock_hz;
  b.prefill_bound_seconds = macs / peak;
  b.decode_bound_seconds_per_token = b.decode_weight_bytes / spec.ddr_bytes_per_second;
  return b;
}

double StylePlan::seconds(const std::vector<StyleStep>& steps, const npu::DeviceSpec& spec) {
  TimingMemo memo(spec);
  return seconds(steps, memo);
}

double StylePlan::seconds(const std::vector<StyleStep>& steps, TimingMemo& memo) {
  double s = 0;
  for (const StyleStep& st : steps) s += static_cast<double>(st.repeat) * time_step(st, memo).seconds;
  return s;
}

int64_t StylePlan::dispatches_per_layer(const std::vector<StyleStep>& steps) const {
  int64_t n = 0;
  for (const StyleStep& st : steps) n += st.npu && st.repeat > 1;
  return n;
}

const StyleStep& StylePlan::step(const std::string& name, bool decode_phase) const {
  for (const StyleStep& s : decode_phase ? decode : prefill)
    if (s.name == name) return s;
  throw_error<UsageError>("{} style {}: no {} step '{}'", model, published_style_name(style),
                          decode_phase ? "decode" : "prefill", name);
}

namespace {

std::string human(double s) {
  if (s >= 1) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} us", s * 1e6);
}

nlohmann::json steps_json(const std::vector<StyleStep>& steps, const npu::DeviceSpec& spec) {
  nlohmann::json a = nlohmann::json::array();
  for (const StyleStep& st : steps) {
    const StepTime t = time_step(st, spec);
    nlohmann::json launches = nlohmann::json::array();
    for (const StyleLaunch& l : st.launches)
      launches.push_back({{"name", l.name}, {"shape", shape_text(l.op->shape)}});
    a.push_back({{"name", st.name}, {"where", st.npu ? "npu" : "host"}, {"repeat", st.repeat},
                 {"seconds", t.seconds}, {"bound", t.bound}, {"launches", launches}});
  }
  return a;
}

}  // namespace

std::string StylePlan::dump(const npu::DeviceSpec& spec) const {
  std::string out = fmt::format("style {} model {} spec {} (calibration: {}) prompt {} -> {} rows, "
                                "hidden {}, FFN {}\n",
                                published_style_name(style), model, spec.name, spec.calibration,
                                prompt, seq, hidden, intermediate);
  for (const auto& [phase, steps] : {std::pair{"prefill", &prefill}, std::pair{"decode", &decode}}) {
    for (const StyleStep& st : *steps) {
      const StepTime t = time_step(st, spec);
      std::string what = st.npu ? fmt::format("npu {} launch{}", st.launches.size(),
                                               st.launches.size() == 1 ? "" : "es")
                                : "host";
      out += fmt::format("  {:<7} {:<16} x{:<3} {:<14} {:>10} each  {:>10} total  bound {}\n", phase,
                         st.name, st.repeat, what, human(t.seconds),
                         human(t.seconds * static_cast<double>(st.repeat)), t.bound);
    }
  }
  for (const auto& n : notes) out += "  note: " + n + "\n";
  return out;
}

nlohmann::json StylePlan::to_json(const npu::DeviceSpec& spec) const {
  return {{"style", published_style_name(style)},
          {"prompt", prompt},
          {"seq", seq},
          {"hidden", hidden},
          {"intermediate", intermediate},
          {"prefill_steps", steps_json(prefill, spec)},
          {"decode_steps", steps_json(decode, spec)},
          {"notes", notes}};
}

}  // namespace tessera::compiler
