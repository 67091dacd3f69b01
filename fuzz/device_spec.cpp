// Fuzz target: a DeviceSpec JSON file (npu/device_spec.h), as `--spec FILE`
// reads it: parsed, validated, written back and read again.
#include "fuzz_common.h"
#include "tessera/npu/device_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = tessera::fuzz::as_json(data, size);
  if (j.is_discarded()) return 0;
  return tessera::fuzz::run_one([&] {
    const auto spec = tessera::npu::DeviceSpec::from_json(j);
    (void)tessera::npu::DeviceSpec::from_json(spec.to_json());
  });
}
