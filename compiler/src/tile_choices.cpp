// The tune-tiles decision store (tile_choices.h).
#include "tessera/compiler/tile_choices.h"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/compiler/graph.h"
#include "tessera/core/error.h"

namespace tessera::compiler {

namespace {

constexpr const char* kFormat = "tessera-tile-choices";

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

nlohmann::json timing_json(const kernels::TileTiming& t) {
  return {{"tiles", t.tiles}, {"seconds", t.seconds}, {"bound", t.bound}};
}

kernels::TileTiming timing_from(const nlohmann::json& j) {
  return {j.at("tiles").get<kernels::TileOptions>(), j.at("seconds").get<double>(),
          j.at("bound").get<std::string>()};
}

}  // namespace

TileChoices::TileChoices(const TileChoices& o) {
  std::lock_guard lock(o.mu_);
  entries_ = o.entries_;
}

TileChoices& TileChoices::operator=(const TileChoices& o) {
  if (this == &o) return *this;
  std::map<std::string, TileDecision> copy;
  {
    std::lock_guard lock(o.mu_);
    copy = o.entries_;
  }
  std::lock_guard lock(mu_);
  entries_ = std::move(copy);
  return *this;
}

std::optional<TileDecision> TileChoices::find(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void TileChoices::put(const std::string& key, TileDecision d) {
  std::lock_guard lock(mu_);
  entries_[key] = std::move(d);
}

size_t TileChoices::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

nlohmann::json TileChoices::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [key, d] : entries_)
    entries.push_back({{"key", key},
                       {"spec", d.spec_hash},
                       {"builder", d.builder},
                       {"candidates", d.candidates},
                       {"refused", d.refused},
                       {"chosen", timing_json(d.chosen)},
                       {"runner_up", timing_json(d.runner_up)},
                       {"default", timing_json(d.builder_default)}});
  return {{"format", kFormat}, {"version", 1}, {"entries", std::move(entries)}};
}

TileChoices TileChoices::from_json(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object() || j.value("format", "") != kFormat || j.value("version", 0) != 1)
    throw_error<InputError>("{}: not a {} version 1 document", what, kFormat);
  TileChoices out;
  size_t i = 0;
  try {
    for (; i < j.at("entries").size(); ++i) {
      const auto& e = j.at("entries").at(i);
      TileDecision d{e.at("spec").get<std::string>(), e.at("builder").get<std::string>(),
                     timing_from(e.at("chosen")), timing_from(e.at("runner_up")),
                     timing_from(e.at("default")), e.at("candidates").get<int64_t>(),
                     e.at("refused").get<int64_t>()};
      out.entries_[e.at("key").get<std::string>()] = std::move(d);
    }
  } catch (const nlohmann::json::exception& e) {
    throw_error<InputError>("{}: entry {} is malformed: {}", what, i, e.what());
  }
  return out;
}

void TileChoices::save(const std::filesystem::path& file) const {
  std::ofstream f(file);
  f << to_json().dump(1) << "\n";
  if (!f) throw_error<FileError>("cannot write the tile choices to {}", file.string());
}

TileChoices TileChoices::load(const std::filesystem::path& file) {
  std::ifstream f(file);
  if (!f) return {};
  const auto j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded()) throw_error<InputError>("{}: not JSON", file.string());
  return from_json(j, file.string());
}

std::string tile_choice_key(const kernels::OpShape& shape, const kernels::TileOptions& fixed) {
  return fmt::format("{} | {}", shape_text(shape), kernels::tiles_text(fixed));
}

std::string spec_hash(const npu::DeviceSpec& spec) {
  return fmt::format("{:016x}", fnv1a(spec.to_json().dump()));
}

std::string builder_fingerprint(const kernels::OpShape& shape, const npu::DeviceSpec& spec,
                                const kernels::TileTiming& builder_default) {
  std::string all = fmt::format("{}\n{}\n{:.17g}\n", shape_text(shape),
                                kernels::tiles_text(builder_default.tiles), builder_default.seconds);
  for (const kernels::TileOptions& c : kernels::op_builder(shape.op).tile_candidates(shape, spec))
    all += kernels::tiles_text(c) + "\n";
  return fmt::format("{:016x}", fnv1a(all));
}

nlohmann::json tile_decision_rows(const Plan& plan, const DesignCache& cache) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [key, d] : plan_tile_decisions(plan, cache))
    rows.push_back({{"op", key.substr(0, key.find(" |"))},
                    {"chosen", kernels::tiles_text(d.chosen.tiles)},
                    {"chosen_seconds", d.chosen.seconds},
                    {"runner_up", d.candidates > 1 ? kernels::tiles_text(d.runner_up.tiles) : "-"},
                    {"runner_up_seconds", d.runner_up.seconds},
                    {"default", kernels::tiles_text(d.builder_default.tiles)},
                    {"default_seconds", d.builder_default.seconds},
                    {"candidates", d.candidates}});
  return rows;
}

}  // namespace tessera::compiler
