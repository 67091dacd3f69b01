#include "tessera/pipeline/deployment.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "tessera/compiler/tile_choices.h"
#include "tessera/core/error.h"
#include "tessera/core/log.h"
#include "tessera/model/model_dir.h"
#include "tessera/pipeline/deployed_plan.h"
#include "tessera/pipeline/manifest.h"

namespace tessera::pipeline {

namespace fs = std::filesystem;

namespace {

void verify(const fs::path& dir, const Manifest& m, const std::string& who) {
  if (m.phases.empty() && m.artifacts.empty())
    throw_error<InputError>("{}: {} is not a deployment (no manifest.json; run tessera deploy first)", who,
                            dir.string());
  const auto problems =
      check_deployment(dir, m, {"model/config.json", "model/tokenizer.json", "spec.json", "weights.safetensors", "plan_final.txt"});
  if (!problems.empty())
    throw_error<InputError>("{}: {} cannot be trusted: {}{}; redeploy", who, dir.string(), problems.front(),
                            problems.size() > 1 ? fmt::format(" (and {} more problems)", problems.size() - 1) : "");
  if (!m.phases.count(6))
    log_warn("{} has not passed phase 6 (integration): its output is not verified", dir.string());
}

}  // namespace

OpenedDeployment open_deployment(const fs::path& dir, const std::string& who) {
  std::string problem;
  const Manifest m = Manifest::load(dir, &problem);
  if (!problem.empty()) throw_error<InputError>("{}: {}: {}", who, dir.string(), problem);
  verify(dir, m, who);
  model::ModelConfig config = model::load_config(dir / "model/config.json");
  auto tok = model::load_tokenizer(dir / "model/tokenizer.json", config);
  std::ifstream sj(dir / "spec.json");
  auto spec = npu::DeviceSpec::from_json(nlohmann::json::parse(sj));
  auto weights = std::make_shared<compiler::PackedWeights>(compiler::PackedWeights::load(dir / "weights.safetensors"));
  // config.json carries no name (load_config names it after its directory):
  // the deployment's model name is the one its weights were packed under.
  config.name = weights->model;
  compiler::DesignCache plan_cache(spec);
  // The tune-tiles decisions deploy made: re-lowering the gated plans (and
  // the session's plans) does not search again; each is re-checked.
  auto choices = std::make_shared<compiler::TileChoices>(compiler::TileChoices::load(dir / "tile_choices.json"));
  plan_cache.use_tile_choices(choices);
  auto session = gated_session_options(load_deployed_plans(dir, plan_cache), config, plan_cache);
  session.tile_choices = choices;
  // run, chat and serve hold nothing else as large: the decode working set
  // stays resident within the 1.5 x bf16 part of deploy's RSS budget
  // (cli/src/cmd_deploy.cpp), not faulted in again every token.
  session.resident_decode_bytes = 3 * config.parameter_count();
  return OpenedDeployment{std::move(config), std::move(tok), std::move(spec), std::move(weights), std::move(session)};
}

fs::path deployment_chat_source(const fs::path& dir, const std::string& who) {
  if (fs::exists(dir / "model/tokenizer_config.json")) return dir / "model";
  std::error_code ec;
  if (fs::is_directory(dir / "gguf", ec))
    for (const auto& e : fs::directory_iterator(dir / "gguf"))
      if (fs::exists(e.path() / "tokenizer_config.json")) return e.path();
  throw_error<FileError>("{}: {} has no tokenizer_config.json with a chat template", who, dir.string());
}

}  // namespace tessera::pipeline
