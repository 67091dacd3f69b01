#pragma once
// Opening a deployment directory (tessera deploy --out) for use: run, chat and
// serve load the same files the same way, and refuse the same things. Every
// file loaded must be what deploy wrote and what the passed phases were judged
// on (check_deployment; manifest.h says what this can and cannot catch).
#include <filesystem>
#include <memory>
#include <string>

#include "tessera/compiler/packed_weights.h"
#include "tessera/model/config.h"
#include "tessera/model/tokenizer.h"
#include "tessera/npu/device_spec.h"
#include "tessera/runtime/session.h"

namespace tessera::pipeline {

struct OpenedDeployment {
  model::ModelConfig config;  // name: the model the weights were packed under
  model::Tokenizer tokenizer;
  npu::DeviceSpec spec;
  std::shared_ptr<compiler::PackedWeights> weights;
  // The style, context and pass pipelines of the plans phases 4-6 gated
  // (deployed_plan.h): every session on the deployment starts from these.
  runtime::SessionOptions session;
};

// `who` names the command in errors ("run: DIR cannot be trusted: ..."). Throws
// InputError for a directory that is not a deployment, or whose manifest or
// artifacts do not check; warns (log) when phase 6 has not passed. The caller
// holds a shared DirLock on `dir` for as long as it uses the result.
OpenedDeployment open_deployment(const std::filesystem::path& dir, const std::string& who);

// Where a deployment's chat template lives: model/tokenizer_config.json, or the
// HF directory a GGUF was converted into (deploy -m FILE.gguf). FileError when
// neither exists.
std::filesystem::path deployment_chat_source(const std::filesystem::path& dir, const std::string& who);

}  // namespace tessera::pipeline
