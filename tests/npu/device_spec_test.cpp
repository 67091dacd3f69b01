#include "tessera/npu/device_spec.h"

#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/npu/errors.h"

namespace tessera::npu {
namespace {

std::string specs(const char* f) { return std::string(TESSERA_TEST_DATA) + "/npu/specs/" + f; }

template <class E>
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

TEST(DeviceSpec, Xdna2PresetMatchesDesignTable) {
  DeviceSpec s = DeviceSpec::preset("xdna2-sourced");
  EXPECT_NO_THROW(s.validate());
  EXPECT_EQ(s.columns, 8);
  EXPECT_EQ(s.compute_rows, 4);
  EXPECT_EQ(s.total_rows(), 6);
  EXPECT_EQ(s.compute_tiles(), 32);
  EXPECT_EQ(s.compute.memory_bytes, 64 * 1024);
  EXPECT_EQ(s.program_memory_bytes, 16 * 1024);
  EXPECT_EQ(s.mem.memory_bytes, 512 * 1024);
  EXPECT_EQ(s.compute.dma_in, 2);
  EXPECT_EQ(s.mem.dma_out, 6);
  EXPECT_EQ(s.shim.dma_in, 2);
  EXPECT_EQ(s.compute.buffer_descriptors, 16);
  EXPECT_EQ(s.mem.buffer_descriptors, 48);
  EXPECT_EQ(s.shim.buffer_descriptors, 16);
  EXPECT_EQ(s.compute.bd_dims, 3);
  EXPECT_EQ(s.mem.bd_dims, 4);
  EXPECT_EQ(s.bd_max_repeat, 255);
  EXPECT_EQ(s.clock_hz, 1.5e9);
  EXPECT_EQ(s.macs_per_cycle_bf16, 256);
  EXPECT_EQ(s.ddr_bytes_per_second, 60e9);
  EXPECT_EQ(s.dispatch_overhead_seconds, 45e-6);
  EXPECT_EQ(s.shim_burst_bytes, 512);
  EXPECT_EQ(s.kind_of_row(0), TileKind::shim);
  EXPECT_EQ(s.kind_of_row(1), TileKind::mem);
  EXPECT_EQ(s.kind_of_row(5), TileKind::compute);
  EXPECT_EQ(&s.limits(TileKind::mem), &s.mem);
}

TEST(DeviceSpec, Xdna1PresetIsPhoenix) {
  DeviceSpec s = DeviceSpec::preset("xdna1");
  EXPECT_NO_THROW(s.validate());
  EXPECT_EQ(s.columns, 4);
  EXPECT_EQ(s.compute_rows, 4);
  EXPECT_EQ(s.macs_per_cycle_bf16, 128);
  EXPECT_EQ(s.mem.memory_bytes, 512 * 1024);
  EXPECT_EQ(s.shim_burst_bytes, 256);
  EXPECT_EQ(s.family, "xdna1");
  // xdna2's clock range does not apply to the xdna1 family and vice versa.
  s.clock_hz = 1.0e9;
  EXPECT_NO_THROW(s.validate());
  s.family = "xdna2";
  EXPECT_THROW(s.validate(), DeviceSpecError);
}

TEST(DeviceSpec, UnknownPresetIsNamed) {
  EXPECT_NE(error_of<DeviceSpecError>([] { DeviceSpec::preset("xdna9"); }).find("'xdna9'"), std::string::npos);
}

TEST(DeviceSpec, JsonOverridesOnTopOfBase) {
  DeviceSpec s = DeviceSpec::load(specs("strix_calibrated.json"));
  EXPECT_EQ(s.name, "strix-calibrated");
  EXPECT_EQ(s.clock_hz, 1.76e9);
  EXPECT_EQ(s.macs_per_cycle_bf16, 128);
  EXPECT_EQ(s.columns, 8);  // untouched fields keep the base preset's value
  EXPECT_DOUBLE_EQ(s.efficiency("matmul_bf16_f32"), 0.6);
  EXPECT_DOUBLE_EQ(s.efficiency("anything_else"), 0.8);
}

TEST(DeviceSpec, UnknownFieldIsNamed) {
  std::string m = error_of<DeviceSpecError>([] { DeviceSpec::load(specs("unknown_field.json")); });
  EXPECT_NE(m.find("unknown field 'compute.banks'"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown_field.json"), std::string::npos) << m;
  m = error_of<DeviceSpecError>([] { DeviceSpec::from_json({{"clock_mhz", 1500}}); });
  EXPECT_NE(m.find("'clock_mhz'"), std::string::npos) << m;
}

TEST(DeviceSpec, OutOfRangeNamesFieldValueAndRange) {
  std::string m = error_of<DeviceSpecError>([] { DeviceSpec::load(specs("out_of_range.json")); });
  EXPECT_NE(m.find("'ddr_bytes_per_second' = 200000000000"), std::string::npos) << m;
  EXPECT_NE(m.find("[45000000000, 66600000000]"), std::string::npos) << m;
  m = error_of<DeviceSpecError>([] { DeviceSpec::from_json({{"kernel_efficiency", {{"default", 1.5}}}}); });
  EXPECT_NE(m.find("kernel_efficiency.default"), std::string::npos) << m;
  m = error_of<DeviceSpecError>([] { DeviceSpec::from_json({{"bd_max_repeat", 256}}); });
  EXPECT_NE(m.find("'bd_max_repeat' = 256"), std::string::npos) << m;
}

TEST(DeviceSpec, WrongTypeIsNamed) {
  std::string m = error_of<DeviceSpecError>([] { DeviceSpec::from_json({{"columns", 2.5}}); });
  EXPECT_NE(m.find("'columns': wrong type"), std::string::npos) << m;
  EXPECT_THROW(DeviceSpec::from_json({{"base", 3}}), DeviceSpecError);
  EXPECT_THROW(DeviceSpec::load(specs("missing.json")), FileError);
}

TEST(DeviceSpec, JsonRoundTripsEveryPreset) {
  for (const auto& name : DeviceSpec::preset_names()) {
    DeviceSpec s = DeviceSpec::preset(name);
    s.kernel_efficiency["gemv"] = 0.5;
    nlohmann::json j = s.to_json();
    EXPECT_EQ(DeviceSpec::from_json(j).to_json(), j) << name;
    EXPECT_EQ(DeviceSpec::from_json(j).family, name == "xdna1" ? "xdna1" : "xdna2");
  }
}

// The built-in xdna2 is the calibrated device: same structure as the sourced
// preset, every physical field inside its range, and it names its calibration.
TEST(DeviceSpec, Xdna2IsTheCalibratedDevice) {
  DeviceSpec cal = DeviceSpec::preset("xdna2"), src = DeviceSpec::preset("xdna2-sourced");
  EXPECT_EQ(cal.name, "xdna2");
  EXPECT_EQ(cal.family, "xdna2");
  EXPECT_NE(cal.calibration, src.calibration);
  EXPECT_FALSE(cal.constrained_kernels.empty());
  EXPECT_EQ(cal.columns, src.columns);
  EXPECT_EQ(cal.compute.memory_bytes, src.compute.memory_bytes);
  EXPECT_EQ(cal.shim.buffer_descriptors, src.shim.buffer_descriptors);
  EXPECT_NO_THROW(cal.validate());
  // A saved spec derives from the sourced preset, never from the compiled-in fit.
  EXPECT_EQ(cal.to_json()["base"], "xdna2-sourced");
}

// The timing-model fields round-trip with their values and are range-checked.
TEST(DeviceSpec, PhysicalFieldsRoundTripAndAreChecked) {
  DeviceSpec s = DeviceSpec::preset("xdna2-sourced");
  s.vector_lanes_per_cycle = 3.5;
  s.mmul_loop_overhead_cycles = 40;
  s.core_call_overhead_cycles = 300;
  s.dma_object_overhead_cycles = 20;
  s.host_bytes_per_second = 9e9;
  s.host_call_overhead_seconds = 30e-6;
  s.calibration = "test fit";
  s.constrained_kernels = {"gemm_acc", "rmsnorm"};
  DeviceSpec r = DeviceSpec::from_json(s.to_json());
  EXPECT_EQ(r.vector_lanes_per_cycle, 3.5);
  EXPECT_EQ(r.mmul_loop_overhead_cycles, 40);
  EXPECT_EQ(r.core_call_overhead_cycles, 300);
  EXPECT_EQ(r.dma_object_overhead_cycles, 20);
  EXPECT_EQ(r.host_bytes_per_second, 9e9);
  EXPECT_EQ(r.host_call_overhead_seconds, 30e-6);
  EXPECT_EQ(r.calibration, "test fit");
  EXPECT_EQ(r.constrained_kernels, s.constrained_kernels);
  std::string m = error_of<DeviceSpecError>([] { DeviceSpec::from_json({{"vector_lanes_per_cycle", 64}}); });
  EXPECT_NE(m.find("'vector_lanes_per_cycle' = 64"), std::string::npos) << m;
  m = error_of<DeviceSpecError>([] { DeviceSpec::from_json({{"mmul_loop_overhead_cycles", -1}}); });
  EXPECT_NE(m.find("mmul_loop_overhead_cycles"), std::string::npos) << m;
}

// Every field to_json writes has a source, and DESIGN.md's calibratable set is
// exactly the one marked so.
TEST(DeviceSpec, FieldSourcesCoverEveryField) {
  for (const auto& preset : DeviceSpec::preset_names()) {
    const std::string family = DeviceSpec::preset(preset).family;
    std::set<std::string> sourced;
    for (const auto& f : field_sources(family)) {
      EXPECT_FALSE(f.source.empty()) << f.field;
      EXPECT_LE(f.min, f.max) << f.field;
      sourced.insert(f.field);
    }
    nlohmann::json j = DeviceSpec::preset(preset).to_json();
    for (const auto& [k, v] : j.items()) {
      if (k == "base" || k == "name" || k == "calibration" || k == "constrained_kernels") continue;
      if (v.is_object() && k != "kernel_efficiency") {
        for (const auto& [k2, v2] : v.items()) EXPECT_TRUE(sourced.count(k + "." + k2)) << k << "." << k2;
      } else {
        EXPECT_TRUE(sourced.count(k)) << k;
      }
    }
  }
  std::set<std::string> calibratable;
  for (const auto& f : field_sources())
    if (f.calibratable) calibratable.insert(f.field);
  EXPECT_EQ(calibratable, (std::set<std::string>{"clock_hz", "stream_bytes_per_cycle", "macs_per_cycle_bf16",
                                                 "ddr_bytes_per_second", "dispatch_overhead_seconds",
                                                 "kernel_efficiency", "mmul_loop_overhead_cycles",
                                                 "vector_lanes_per_cycle", "core_call_overhead_cycles",
                                                 "dma_object_overhead_cycles", "host_bytes_per_second",
                                                 "host_call_overhead_seconds", "gemv_macs_per_cycle",
                                                 "host_copy_bytes_per_second"}));
}

}  // namespace
}  // namespace tessera::npu
