// The deployment context: lazily loaded weights, oracle results, plans and
// packed weights (deploy_internal.h), and the input hashes resume relies on.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "deploy_internal.h"
#include "tessera/core/mutants.h"
#include "tessera/compiler/passes.h"
#include "tessera/compiler/tile_choices.h"
#include "tessera/core/error.h"
#include "tessera/model/mapped_pages.h"
#include "tessera/model/model_dir.h"
#include "tessera/model/synth.h"
#include "tessera/oracle/rope.h"

namespace tessera::pipeline::detail {

namespace {

model::ModelConfig initial_config(const DeployOptions& o) {
  if (o.model_dir.empty() == o.preset.empty())
    throw_error<UsageError>("deploy: give exactly one of a model directory or a preset");
  if (o.layers < 0) throw_error<UsageError>("deploy: --layers must be > 0, got {}", o.layers);
  std::optional<int64_t> layers;
  if (o.layers > 0) layers = o.layers;
  if (!o.preset.empty()) return model::synthetic_config(model::preset(o.preset), layers);
  model::ModelConfig c = model::load_config(o.model_dir / "config.json");
  if (layers) {
    if (*layers > c.num_layers)
      throw_error<UsageError>("deploy: --layers {} exceeds the {} layers of {}", *layers,
                              c.num_layers, o.model_dir.string());
    c.num_layers = *layers;
  }
  return c;
}

// An --out that is neither new, empty nor a deployment is refused before
// anything is written into it: deploy would mix its files with someone else's.
void check_out_dir(const fs::path& out) {
  if (out.empty()) throw_error<UsageError>("deploy: an output directory is required (--out)");
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec))
    throw_error<UsageError>("deploy: --out {} exists and is not a directory", out.string());
  if (fs::exists(out / "manifest.json") || fs::exists(out / ".tessera.lock")) return;
  // `deploy -m FILE.gguf` converts the file into OUT/gguf/ before deploy() runs:
  // that subdirectory is the deployment's own, not someone else's files.
  for (const auto& e : fs::directory_iterator(out, ec))
    if (e.path().filename() != "gguf")
      throw_error<UsageError>("deploy: --out {} is a non-empty directory that is not a deployment (no "
                            "manifest.json); choose a new or empty directory", out.string());
}

}  // namespace

std::vector<int32_t> gate_prompt(uint64_t seed, int64_t n, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    ids.push_back(static_cast<int32_t>(z % static_cast<uint64_t>(vocab)));
  }
  return ids;
}

runtime::Values host_inputs(const model::ModelConfig& c, const std::vector<int32_t>& tokens) {
  const auto S = static_cast<int64_t>(tokens.size());
  runtime::Values v;
  v["host:token_ids"] = std::vector<float>(tokens.begin(), tokens.end());
  const oracle::RopeTable rope = oracle::rope_table(c, 0, S);
  v["host:rope_cos"] = rope.cos;
  v["host:rope_sin"] = rope.sin;
  for (int64_t l = 0; l < c.num_layers; ++l)
    for (const char* kv : {"k_cache_in", "v_cache_in"})
      v[fmt::format("host:L{}.{}", l, kv)] = std::vector<float>(static_cast<size_t>(S * c.kv_dim()), 0.0f);
  return v;
}

const std::vector<float>& npu_value(const runtime::ExecResult& r, const std::string& name) {
  auto it = r.values.find(name);
  TESSERA_CHECK(it != r.values.end(), "the NPU run kept no value {}", name);
  return it->second;
}

std::vector<float> OracleRun::step_row(size_t i, int64_t vocab) const {
  const auto V = static_cast<size_t>(vocab);
  TESSERA_CHECK((i + 1) * V <= step_logits.size(), "oracle step {} of {} logits", i, step_logits.size() / V);
  return {step_logits.begin() + static_cast<std::ptrdiff_t>(i * V),
          step_logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * V)};
}

Context::Context(const DeployOptions& o, Manifest& m)
    : opts(o), manifest(m), out(o.out), config(initial_config(o)) {
  check_out_dir(out);
  if (o.prompt.empty() && o.gate_seq < 2)
    throw_error<UsageError>("deploy: the gate prompt needs >= 2 tokens, got --seq {}", o.gate_seq);
  if (o.continuation < 1)
    throw_error<UsageError>("deploy: the continuation needs >= 1 token, got {}", o.continuation);
  for (int32_t t : o.prompt)
    if (t < 0 || t >= config.vocab_size)
      throw_error<UsageError>("deploy: prompt id {} outside the vocabulary [0, {})", t, config.vocab_size);
  // Phase 6 prefills the prompt and decodes continuation - 1 tokens after it
  // in a runtime session of the default context; phase 0's oracle covers the
  // same positions.
  const int64_t context = config.default_context();
  if (seq() + o.continuation - 1 > context)
    throw_error<UsageError>("deploy: a {}-token gate prompt (--seq) and {} continuation tokens (--tokens) "
                            "need {} positions; {} has {} (max_position_embeddings {}, capped at 4096)",
                            seq(), o.continuation, seq() + o.continuation - 1, config.name, context,
                            config.max_position_embeddings);
  const FileHasher plain = plain_hasher(out);
  hasher_ = [this, plain](const std::string& rel) {
    auto it = sha_memo_.find(rel);
    return it != sha_memo_.end() ? it->second : (sha_memo_[rel] = plain(rel));
  };
}

void Context::forget_hashes() {
  sha_memo_.clear();
  if (!opts.preset.empty()) source_hash_.reset();  // a preset's source lives in `out`
}

int64_t Context::seq() const {
  return opts.prompt.empty() ? opts.gate_seq : static_cast<int64_t>(opts.prompt.size());
}

fs::path Context::source_dir() const {
  return opts.preset.empty() ? opts.model_dir : out / "source";
}

const model::Weights& Context::weights() {
  if (weights_) return *weights_;
  model::ModelDir md = model::load_model_dir(source_dir());
  // Only the tensors of the kept layers (the rest would fail check_against).
  model::Weights w;
  for (const auto& s : model::tensor_specs(config)) w.add(s.name, md.weights.get(s.name));
  w.check_against(config);
  weights_ = std::move(w);
  return *weights_;
}

OracleRun& Context::oracle() {
  if (!oracle_) oracle_ = load_oracle(out / "oracle.safetensors");
  return *oracle_;
}

void Context::set_oracle(OracleRun run) { oracle_ = std::move(run); }

compiler::DesignCache& Context::cache() {
  if (!cache_) {
    cache_ = std::make_unique<compiler::DesignCache>(opts.spec);
    // A resumed deploy takes the tune-tiles decisions it made before; the
    // pass re-checks each against this spec and these builders.
    cache_->tile_choices() = compiler::TileChoices::load(out / "tile_choices.json");
  }
  return *cache_;
}

compiler::PlanOptions Context::plan_options(bool decode) const {
  compiler::PlanOptions po;
  po.style = opts.style;
  const auto& chosen = decode ? decode_passes_ : prefill_passes_;
  if (chosen.empty()) {
    for (const std::string& p : compiler::style_passes(opts.style))
      for (const auto& info : compiler::pass_registry())
        if (p == info.name && info.required) po.passes.push_back(p);
  } else {
    po.passes = chosen;
  }
  po.plant_bug = opts.plant_pass_bug;
  return po;
}

void Context::set_passes(bool decode, std::vector<std::string> passes) {
  (decode ? decode_passes_ : prefill_passes_) = std::move(passes);
  (decode ? decode_ : prefill_).reset();
}

const compiler::Plan& Context::prefill_plan() {
  if (!prefill_)
    prefill_ = std::make_unique<compiler::Plan>(compiler::lower(config, seq(), 0, cache(), plan_options(false)));
  return *prefill_;
}

const compiler::Plan& Context::decode_plan() {
  if (!decode_)
    decode_ = std::make_unique<compiler::Plan>(compiler::lower(config, 1, seq(), cache(), plan_options(true)));
  return *decode_;
}

std::shared_ptr<compiler::PackedWeights> Context::packed() {
  if (packed_) return packed_;
  const fs::path file = out / "weights.safetensors";
  auto p2 = manifest.phases.find(2);
  // Phase 2 packs; once it is running again, the file on disk is from another
  // run (other source, options or an interrupted pack) whatever its sha256 says.
  if (!(p2 != manifest.phases.end() && p2->second.status == "passed" && manifest.artifacts.count("weights.safetensors") &&
        hasher_("weights.safetensors") == manifest.artifacts.at("weights.safetensors").sha256)) {
    if (fs::exists(file))
      issues.push_back("weights.safetensors repacked from the source weights (phase 2 is redone; the file "
                       "on disk is never loaded)");
    std::vector<const compiler::Plan*> plans = {&prefill_plan(), &decode_plan()};
    // tune-tiles may give a decode linear another weight layout; its choices
    // do not depend on the other optional passes (it runs before them), so
    // these two plans cover whatever phases 4 and 5 keep.
    const std::vector<compiler::Plan> tuned = tuned_plans();
    for (const compiler::Plan& p : tuned) plans.push_back(&p);
    // Streamed to the file key by key, then mapped: the packed model is
    // never in memory (it is as large as the model, twice for two layouts).
    compiler::write_packed_weights(file, plans, config, weights(),
                                   [this](size_t d, size_t t) { progress("pack weights", d, t); });
    model::release_mapped_pages(*weights_);  // packing read every source tensor once
  }
  packed_ = std::make_shared<compiler::PackedWeights>(compiler::PackedWeights::load(file));
  if (opts.tamper_packed) opts.tamper_packed(*packed_);
  return packed_;
}

std::vector<compiler::Plan> Context::tuned_plans() {
  std::vector<compiler::Plan> plans;
  const auto style = compiler::style_passes(opts.style);
  if (std::find(style.begin(), style.end(), "tune-tiles") == style.end()) return plans;
  for (const bool decode : {false, true}) {
    compiler::PlanOptions po = plan_options(decode);
    po.passes.clear();
    for (const auto& info : compiler::pass_registry())
      if (info.required || info.name == std::string("tune-tiles")) po.passes.push_back(info.name);
    po.plant_bug.clear();  // the weights serve the real plans, not a planted one
    plans.push_back(compiler::lower(config, decode ? 1 : seq(), decode ? seq() : 0, cache(), po));
  }
  return plans;
}

void Context::release_pages() const {
  if (weights_) model::release_mapped_pages(*weights_);
  if (packed_) packed_->release_pages();
}

std::string Context::options_hash() const {
  const nlohmann::json j = {
      {"source", opts.preset.empty() ? fs::absolute(opts.model_dir).string() : "preset:" + opts.preset},
      {"layers", config.num_layers},
      {"prompt", opts.prompt.empty() ? gate_prompt(opts.seed, opts.gate_seq, config.vocab_size) : opts.prompt},
      {"continuation", opts.continuation},
      {"seed", opts.seed},
      {"style", compiler::plan_style_name(opts.style)},
      {"spec", opts.spec.to_json()}};
  return sha256_text(j.dump());
}

std::string Context::source_hash() {
  if (source_hash_) return *source_hash_;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(source_dir())) {
    const std::string n = e.path().filename().string();
    if (n == "config.json" || n == "tokenizer.json" || n.ends_with(".safetensors") ||
        n.ends_with(".safetensors.index.json"))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::string all;
  for (size_t i = 0; i < files.size(); ++i) {
    progress("hash source", i, files.size());
    all += files[i].filename().string() + ":" + sha256_file(files[i]) + "\n";
  }
  progress("hash source", files.size(), files.size());
  source_hash_ = sha256_text(all);
  return *source_hash_;
}

std::map<std::string, std::string> Context::inputs_of(int phase) {
  std::map<std::string, std::string> in = earlier_artifacts(hasher_, manifest, phase);
  in["options"] = options_hash();
  // A preset's source is phase 0's own output; a model directory is an input of every phase.
  if (phase > 0 || opts.preset.empty()) in["source"] = source_hash();
  // A verdict reached with a planted bug never stands for the real deployment.
  if (opts.tamper_packed && phase >= 2) in["planted_bug"] = "active";
  if (active_mutant() != Mutant::none && phase >= 1) in["planted_bug"] = std::string("mutant:") + mutant_name(active_mutant());
  return in;
}

std::vector<std::string> Context::underived(int phase) {
  std::vector<std::string> differ;
  auto expect = [&](const std::string& rel, const std::string& sha, const std::string& from) {
    if (manifest.artifacts.count(rel) && hasher_(rel) != sha)
      differ.push_back(fmt::format("{}: not what {} gives", rel, from));
  };
  if (phase == 0) {
    expect("model/config.json", sha256_text(model::config_to_json(config).dump(2) + "\n"),
           "the source config.json and --layers");
    const fs::path tok = source_dir() / "tokenizer.json";
    expect("model/tokenizer.json", fs::exists(tok) ? sha256_file(tok) : "missing", "the source tokenizer.json");
    const fs::path tc = source_dir() / "tokenizer_config.json";
    expect("model/tokenizer_config.json", fs::exists(tc) ? sha256_file(tc) : "missing",
           "the source tokenizer_config.json");
  }
  if (phase == 2) expect("spec.json", sha256_text(opts.spec.to_json().dump(2) + "\n"), "the device spec");
  return differ;
}

void Context::progress(const std::string& label, size_t done, size_t total) const {
  if (opts.progress) opts.progress(label, done, total);
}

}  // namespace tessera::pipeline::detail
