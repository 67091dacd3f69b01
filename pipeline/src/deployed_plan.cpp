// deployed_plan.h: the session options of the plans a deployment gated.
#include "tessera/pipeline/deployed_plan.h"

#include <fstream>
#include <sstream>

#include "tessera/core/error.h"

namespace tessera::pipeline {

namespace fs = std::filesystem;

namespace {

// plan_final.txt is the prefill dump, a blank line, then the decode dump;
// each dump starts with its "plan " header line.
std::pair<std::string, std::string> split_plans(const std::string& text, const fs::path& file) {
  const std::string marker = "\nplan ";
  const size_t first = text.rfind("plan ", 0) == 0 ? 0 : std::string::npos;
  const size_t second = text.find(marker);
  if (first == std::string::npos || second == std::string::npos || text.find(marker, second + 1) != std::string::npos)
    throw_error<InputError>("{}: expected two plans (prefill, then decode), each starting with a 'plan' line",
                            file.string());
  std::string pre = text.substr(0, second + 1), dec = text.substr(second + 1);
  while (pre.size() >= 2 && pre.substr(pre.size() - 2) == "\n\n") pre.pop_back();
  return {pre, dec};
}

// The first line where two dumps differ, for the error message.
std::string first_difference(const std::string& want, const std::string& got) {
  std::istringstream a(want), b(got);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ea = !std::getline(a, la), eb = !std::getline(b, lb);
    if (ea && eb) return "identical";
    if (ea != eb || la != lb)
      return fmt::format("line {}: stored '{}', re-lowered '{}'", line, ea ? "<end>" : la, eb ? "<end>" : lb);
  }
}

void check_reproduced(const compiler::Plan& stored, const std::string& text, const model::ModelConfig& config,
                      const runtime::SessionOptions& so, compiler::DesignCache& cache, const char* which) {
  compiler::PlanOptions po;
  po.style = so.style;
  po.context = so.context;
  po.host = so.host;
  po.passes = stored.passes;
  const std::string again = compiler::lower(config, stored.seq, stored.past, cache, po).dump();
  if (again != text)
    throw_error<InputError>(
        "plan_final.txt: the gated {} plan (S={}, P={}) is not what this build lowers from the deployment's "
        "model, spec and passes ({}); redeploy",
        which, stored.seq, stored.past, first_difference(text, again));
}

}  // namespace

DeployedPlans load_deployed_plans(const fs::path& dir, compiler::DesignCache& cache) {
  const fs::path file = dir / "plan_final.txt";
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw_error<InputError>("{}: missing (the plans phases 4-6 gated); redeploy with this version", file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  auto [pre, dec] = split_plans(ss.str(), file);
  DeployedPlans p{pre, dec, compiler::parse_plan(pre, cache), compiler::parse_plan(dec, cache)};
  if (p.decode.seq != 1 || p.prefill.seq < 1)
    throw_error<InputError>("{}: expected a prefill plan then a decode plan (S = 1), got S = {} then S = {}",
                            file.string(), p.prefill.seq, p.decode.seq);
  if (p.prefill.style != p.decode.style || p.prefill.context != p.decode.context)
    throw_error<InputError>("{}: the prefill and decode plans disagree on style or context", file.string());
  return p;
}

runtime::SessionOptions gated_session_options(const DeployedPlans& plans, const model::ModelConfig& config,
                                              compiler::DesignCache& cache) {
  runtime::SessionOptions so;
  so.style = plans.prefill.style;
  so.context = plans.prefill.context;
  so.host = plans.prefill.host;
  so.prefill_passes = plans.prefill.passes;
  so.decode_passes = plans.decode.passes;
  check_reproduced(plans.prefill, plans.prefill_text, config, so, cache, "prefill");
  check_reproduced(plans.decode, plans.decode_text, config, so, cache, "decode");
  return so;
}

}  // namespace tessera::pipeline
