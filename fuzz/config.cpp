// Fuzz target: config.json -> ModelConfig (model/config.h), then everything
// that sizes itself from the config (tensor table, parameter count, summary),
// which the size limits must keep bounded.
#include "fuzz_common.h"
#include "tessera/model/config.h"
#include "tessera/model/tensor_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = tessera::fuzz::as_json(data, size);
  if (j.is_discarded()) return 0;
  return tessera::fuzz::run_one([&] {
    const tessera::model::ModelConfig c = tessera::model::parse_config(j, "fuzz/config.json");
    (void)tessera::model::tensor_specs(c);
    (void)c.parameter_count();
    (void)tessera::model::config_summary(c);
    (void)tessera::model::parse_config(tessera::model::config_to_json(c), "round trip");
  });
}
