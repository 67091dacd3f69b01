#pragma once
// Calibration of the timing model against the published Llama-3.2-1B figures
// (../shared/reference/published-llama-3.2-1b.md) and only those: mlir-air's
// kernel registry (each kernel alone), its per-dispatch times and both
// systems' end-to-end numbers. Every figure is predicted with a design built
// in the configuration the source lists where the builders can express it
// (LlamaFigures::notes says where they cannot). The fitted fields are few,
// physical and each confined to its published range (field_sources()).
// `tessera bench-device --calibrate FILE` runs it; docs/calibration.md has the
// method and the result.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/compiler/style_published.h"
#include "tessera/npu/device_spec.h"

namespace tessera::compiler {

struct FigurePrediction {
  double seconds = 0;
  std::string bound;
};

struct PublishedFigure {
  std::string name;
  std::string group;    // "registry" | "dispatch" | "end-to-end"
  std::string config;   // the configuration the design was built in
  std::string source;
  double published_seconds = 0;
  // Out-of-sample figures are predicted, never fitted: IRON's end-to-end
  // numbers, whose kernels and tile configurations are not published.
  bool fitted = true;
  std::function<FigurePrediction(TimingMemo&)> predict;
  FigurePrediction operator()(const npu::DeviceSpec& spec) const {
    TimingMemo memo(spec);
    return predict(memo);
  }
};

// Builds every design once on `base` (calibration moves no structural field,
// so the same designs are re-timed under every trial spec).
class LlamaFigures {
 public:
  explicit LlamaFigures(const npu::DeviceSpec& base);
  const std::vector<PublishedFigure>& figures() const { return figures_; }
  const std::vector<std::string>& notes() const { return notes_; }
  const std::vector<std::string>& kernels() const { return kernels_; }  // exercised

 private:
  std::vector<PublishedFigure> figures_;
  std::vector<std::string> notes_;
  std::vector<std::string> kernels_;
};

// The fields the fit moves (each calibratable in field_sources()).
const std::vector<std::string>& fitted_fields();

struct FitResult {
  npu::DeviceSpec spec;
  double loss_before = 0, loss_after = 0;  // sum of squared log errors
};
// Coordinate search over a grid inside each field's published range, repeated
// until a sweep changes nothing; deterministic. `skip` leaves one figure out
// (-1: none). Starts from `start`.
FitResult fit(const LlamaFigures& figs, const npu::DeviceSpec& start, int skip = -1,
              int sweeps = 8);

struct LeaveOneOut {
  std::string figure;
  double published = 0, predicted = 0;  // predicted by the fit without it
};
// For every fitted figure: fit without it (warm start), predict it.
std::vector<LeaveOneOut> leave_one_out(const LlamaFigures& figs, const npu::DeviceSpec& fitted);

}  // namespace tessera::compiler
