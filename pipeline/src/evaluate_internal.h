#pragma once
// Shared by the evaluator's files (evaluate.cpp, evaluate_audit.cpp,
// evaluate_measure.cpp). Deliberately nothing from deploy_internal.h: the
// evaluator loads the deployment its own way and shares with the phases only
// the canonical threshold tables and the libraries below pipeline/.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/compiler/packed_weights.h"
#include "tessera/compiler/plan.h"
#include "tessera/model/config.h"
#include "tessera/model/weights.h"
#include "tessera/npu/device_spec.h"
#include "tessera/pipeline/evaluate.h"

namespace tessera::pipeline::eval {

namespace fs = std::filesystem;

// What the evaluator loaded itself; a part that failed to load is empty and
// its failure is already a check.
struct Loaded {
  fs::path dir;
  std::optional<model::ModelConfig> config;
  std::optional<npu::DeviceSpec> spec;
  std::shared_ptr<compiler::PackedWeights> packed;
  std::unique_ptr<compiler::DesignCache> cache;
  std::optional<compiler::Plan> prefill, decode;  // plan_final.txt, parsed back
  std::optional<model::Weights> source;           // the source weights of the kept layers
  std::vector<int32_t> deploy_prompt;             // phase 0's gate prompt (fresh prompts must differ)
  bool runnable() const { return config && spec && packed && prefill && decode && source; }
};

class Checks {
 public:
  void ok(const std::string& area, const std::string& name, const std::string& evidence);
  void warn(const std::string& area, const std::string& name, const std::string& evidence);
  void fail(const std::string& area, const std::string& name, const std::string& evidence);
  std::vector<EvalCheck> all;
};

// The JSON file dir/rel; nullopt (and a failed check in `area`) when it is
// missing or does not parse.
std::optional<nlohmann::json> read_json(const fs::path& dir, const std::string& rel, Checks& c,
                                        const std::string& area);

// evaluate_audit.cpp
void audit_integrity(const fs::path& dir, Checks& c);
void load_deployment(Loaded& d, const EvaluateOptions& o, Checks& c);
void audit_plan(const Loaded& d, Checks& c);
void audit_weights(const Loaded& d, Checks& c);
void audit_totals(const Loaded& d, Checks& c);
void audit_report(const fs::path& dir, Checks& c);
// evaluate_thresholds.cpp
void audit_thresholds(const Loaded& d, Checks& c);
// evaluate_measure.cpp
void measure_numerics(const Loaded& d, const EvaluateOptions& o, Checks& c, nlohmann::json& measures);
void measure_determinism(const Loaded& d, Checks& c, nlohmann::json& measures);

}  // namespace tessera::pipeline::eval
