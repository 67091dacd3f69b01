#include "tessera/pipeline/deployment.h"

#include <exception>
#include <fstream>
#include <future>
#include <optional>

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

namespace {

// Everything open_deployment builds from the files: its config, tokenizer,
// spec, packed weights and gated session plans.
OpenedDeployment load_opened(const fs::path& dir) {
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

}  // namespace

// The manifest check hashes every artifact (the packed weights and the source
// model: 3.9 GB for a 4-layer llama-3.2-1b, 2.6 s) and the plans are
// re-lowered and their weight layouts probed (as long again): the two run side
// by side. Nothing is run before the check has passed, and where both fail
// the check's verdict is the error (a tampered file is reported as such, not
// as whatever its parser made of it).
OpenedDeployment open_deployment(const fs::path& dir, const std::string& who) {
  std::string problem;
  const Manifest m = Manifest::load(dir, &problem);
  if (!problem.empty()) throw_error<InputError>("{}: {}: {}", who, dir.string(), problem);
  if (m.phases.empty() && m.artifacts.empty()) verify(dir, m, who);  // not a deployment
  auto checked = std::async(std::launch::async, [&] { verify(dir, m, who); });
  std::optional<OpenedDeployment> opened;
  std::exception_ptr load_error;
  try {
    opened.emplace(load_opened(dir));
  } catch (...) {
    load_error = std::current_exception();
  }
  checked.get();  // throws the check's verdict first
  if (load_error) std::rethrow_exception(load_error);
  return std::move(*opened);
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
