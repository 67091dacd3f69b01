// Calibration of the timing model's calibratable fields against published
// microbenchmarks: coordinate search, one field at a time over a grid inside
// its published range, repeated until no field improves the loss.
#include <cmath>
#include <set>

#include "tessera/npu/designs.h"
#include "tessera/npu/errors.h"

namespace tessera::npu {

namespace {

struct Knob {
  std::string field;
  std::vector<double> grid;
  std::function<double&(DeviceSpec&)> ref;
};

std::vector<double> linear(double lo, double hi, double step) {
  std::vector<double> g;
  for (int i = 0; lo + i * step <= hi * (1 + 1e-12); ++i) g.push_back(lo + i * step);
  return g;
}

std::vector<double> geometric(double lo, double hi, int points) {
  std::vector<double> g;
  for (int i = 0; i < points; ++i) g.push_back(lo * std::pow(hi / lo, i / double(points - 1)));
  return g;
}

const FieldSource& range_of(const DeviceSpec& s, const std::string& field) {
  for (const auto& f : field_sources(s.family))
    if (f.field == field) return f;
  throw_error<DeviceSpecError>("no published range for calibratable field '{}'", field);
}

std::vector<Knob> knobs(const DeviceSpec& base, const std::set<std::string>& kernels) {
  auto r = [&](const char* f) { return range_of(base, f); };
  std::vector<Knob> k;
  k.push_back({"ddr_bytes_per_second", linear(r("ddr_bytes_per_second").min,
                                              r("ddr_bytes_per_second").max, 0.1e9),
               [](DeviceSpec& s) -> double& { return s.ddr_bytes_per_second; }});
  k.push_back({"stream_bytes_per_cycle", linear(r("stream_bytes_per_cycle").min,
                                                r("stream_bytes_per_cycle").max, 0.0625),
               [](DeviceSpec& s) -> double& { return s.stream_bytes_per_cycle; }});
  k.push_back({"clock_hz", linear(r("clock_hz").min, r("clock_hz").max, 0.01e9),
               [](DeviceSpec& s) -> double& { return s.clock_hz; }});
  k.push_back({"dispatch_overhead_seconds",
               linear(r("dispatch_overhead_seconds").min, r("dispatch_overhead_seconds").max, 0.5e-6),
               [](DeviceSpec& s) -> double& { return s.dispatch_overhead_seconds; }});
  // The matrix unit is 128 or 256 wide; nothing in between exists.
  k.push_back({"macs_per_cycle_bf16", {r("macs_per_cycle_bf16").min, r("macs_per_cycle_bf16").max},
               [](DeviceSpec& s) -> double& { return s.macs_per_cycle_bf16; }});
  const FieldSource& eff = range_of(base, "kernel_efficiency");
  for (const auto& name : kernels)
    k.push_back({"kernel_efficiency." + name, geometric(eff.min, eff.max, 201),
                 [name](DeviceSpec& s) -> double& {
                   if (!s.kernel_efficiency.count(name))
                     s.kernel_efficiency[name] = s.efficiency(name);
                   return s.kernel_efficiency[name];
                 }});
  return k;
}

// Kernels that do MAC work in the benchmarks: the only ones whose efficiency a
// throughput measurement can tell.
std::set<std::string> mac_kernels(const std::vector<Design>& designs, const DeviceSpec& spec,
                                  const KernelRegistry& reg) {
  std::set<std::string> out;
  std::function<void(const std::vector<CoreOp>&)> walk = [&](const std::vector<CoreOp>& ops) {
    for (const auto& op : ops) {
      walk(op.body);
      if (op.kind == CoreOp::Kind::call && reg.get(op.kernel).macs &&
          reg.get(op.kernel).macs(op.params) > 0)
        out.insert(op.kernel);
    }
  };
  for (const auto& d : designs)
    for (const auto& l : d.launches)
      for (const auto& c : l.cores) walk(c.program);
  (void)spec;
  return out;
}

}  // namespace

Calibration calibrate(const DeviceSpec& base, const std::vector<Microbenchmark>& benches,
                      const KernelRegistry& registry) {
  // Designs depend only on structural fields, which calibration never moves.
  std::vector<Design> designs;
  std::vector<const Microbenchmark*> used;
  for (const auto& b : benches) {
    try {
      designs.push_back(b.build(base));
      used.push_back(&b);
    } catch (const DesignError&) {
      // not expressible on this spec (e.g. 8 columns on xdna1): not fitted
    }
  }
  if (designs.empty())
    throw_error<DesignError>("calibrate: none of the {} benchmarks fits spec '{}'", benches.size(),
                             base.name);
  auto loss = [&](const DeviceSpec& s) {
    double sum = 0;
    for (size_t i = 0; i < designs.size(); ++i) {
      double e = std::log(used[i]->metric(estimate_time(designs[i], s, registry)) /
                          used[i]->published);
      sum += e * e;
    }
    return sum;
  };
  Calibration c;
  c.spec = base;
  c.loss_before = c.loss_after = loss(base);
  std::vector<Knob> ks = knobs(base, mac_kernels(designs, base, registry));
  for (int sweep = 0; sweep < 8; ++sweep) {
    bool improved = false;
    for (auto& k : ks) {
      DeviceSpec trial = c.spec;
      double& v = k.ref(trial);
      double best = v;
      for (double g : k.grid) {
        v = g;
        double l = loss(trial);
        if (l < c.loss_after * (1 - 1e-9)) {
          c.loss_after = l;
          best = g;
          improved = true;
        }
      }
      v = best;
      k.ref(c.spec) = best;
    }
    if (!improved) break;
  }
  c.spec.name = base.name + "-calibrated";
  c.spec.validate();
  c.before = predict(benches, base, registry);
  c.after = predict(benches, c.spec, registry);
  return c;
}

}  // namespace tessera::npu
