// tessera device: print a DeviceSpec with the source (and, for calibratable
// fields, the published range) of every field.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "tessera/npu/device_spec.h"

namespace {

std::string value_text(const nlohmann::json& v) {
  if (v.is_number_float()) return fmt::format("{:g}", v.get<double>());
  return v.dump();
}

tessera::cli::Action setup_device(CLI::App& app) {
  auto* sub = app.add_subcommand("device", "Print a device spec with the source of every field");
  auto spec_name = std::make_shared<std::string>("xdna2");
  auto json = std::make_shared<bool>(false);
  sub->add_option("--spec", *spec_name, "Preset (xdna2 | xdna1) or spec JSON file")
      ->capture_default_str();
  sub->add_flag("--json", *json, "Print the spec as JSON (loadable with --spec)");
  return [spec_name, json] {
    auto spec = tessera::cli::spec_from_arg(*spec_name);
    nlohmann::json j = spec.to_json();
    if (*json) {
      fmt::print("{}\n", j.dump(2));
      return 0;
    }
    fmt::print("device {} (family {})\n", spec.name, spec.family);
    fmt::print("{:<28} {:>14}  {:<22} {}\n", "field", "value", "calibratable range", "source");
    for (const auto& f : tessera::npu::field_sources(spec.family)) {
      std::string ptr = "/" + f.field;
      for (auto& ch : ptr)
        if (ch == '.') ch = '/';
      nlohmann::json::json_pointer p(ptr);
      std::string value = j.contains(p) ? value_text(j[p]) : "";
      if (f.field == "kernel_efficiency") value = j["kernel_efficiency"].dump();
      std::string range = f.calibratable ? fmt::format("yes {:g}..{:g}", f.min, f.max) : "no";
      fmt::print("{:<28} {:>14}  {:<22} {}\n", f.field, value, range, f.source);
    }
    return 0;
  };
}
TESSERA_COMMAND("device", setup_device);

}  // namespace
