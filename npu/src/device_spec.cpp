#include "tessera/npu/device_spec.h"

#include <fstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "tessera/npu/errors.h"

namespace tessera::npu {
namespace {

using FieldRef = std::variant<int*, int64_t*, double*, bool*>;

// One scalar field: its JSON path, how to reach it, where its default comes
// from, and the range validate() enforces (published range when calibratable,
// structural sanity bounds otherwise). One table drives JSON load / save,
// validation and the source listing, so a field cannot be half-supported.
struct FieldDef {
  const char* name;
  FieldRef (*get)(DeviceSpec&);
  const char* source;
  bool calibratable;
  double min, max;
};

#define TS_F(member) [](DeviceSpec& s) -> FieldRef { return &s.member; }

constexpr double kKiB = 1024;
constexpr const char* kTarget = "mlir-aie AIETargetModel (NPU2TargetModel); hardware.md";
constexpr const char* kHostBw =
    "target CPU Ryzen AI 9 HX 370 (Strix Point, 4 Zen 5 + 8 Zen 5c, LPDDR5X-7500 128-bit = 120 GB/s "
    "shared with the NPU; hardware.md): one host thread streams a fraction of it";
constexpr const char* kAirNotes = "mlir-air notes (DMA wrap <= 1024, repeat <= 255); hardware.md";

const std::vector<FieldDef>& field_defs() {
  static const std::vector<FieldDef> defs = {
      {"columns", TS_F(columns), "Linux amdxdna docs (Strix 4x8); mlir-aie AIETargetModel", false, 1, 64},
      {"compute_rows", TS_F(compute_rows), "Linux amdxdna docs; mlir-aie AIETargetModel", false, 1, 16},
      {"mem_rows", TS_F(mem_rows), kTarget, false, 1, 1},
      {"shim_rows", TS_F(shim_rows), kTarget, false, 1, 1},
      {"compute.memory_bytes", TS_F(compute.memory_bytes), "64 KiB data memory in 8 banks; " "mlir-aie target model", false, 1 * kKiB, 1024 * kKiB},
      {"compute.dma_in", TS_F(compute.dma_in), kTarget, false, 1, 16},
      {"compute.dma_out", TS_F(compute.dma_out), kTarget, false, 1, 16},
      {"compute.buffer_descriptors", TS_F(compute.buffer_descriptors), kTarget, false, 1, 256},
      {"compute.locks", TS_F(compute.locks), kTarget, false, 1, 256},
      {"compute.bd_dims", TS_F(compute.bd_dims), "compute tile BDs are 3-D; mlir-aie", false, 1, 4},
      {"mem.memory_bytes", TS_F(mem.memory_bytes), "512 KiB per mem tile; mlir-aie target model", false, 1 * kKiB, 16384 * kKiB},
      {"mem.dma_in", TS_F(mem.dma_in), kTarget, false, 1, 32},
      {"mem.dma_out", TS_F(mem.dma_out), kTarget, false, 1, 32},
      {"mem.buffer_descriptors", TS_F(mem.buffer_descriptors), kTarget, false, 1, 256},
      {"mem.locks", TS_F(mem.locks), kTarget, false, 1, 256},
      {"mem.bd_dims", TS_F(mem.bd_dims), "mem tile BDs are 4-D; mlir-aie", false, 1, 4},
      {"shim.memory_bytes", TS_F(shim.memory_bytes), "shim tiles have no memory (host DDR)", false, 0, 0},
      {"shim.dma_in", TS_F(shim.dma_in), kTarget, false, 1, 16},
      {"shim.dma_out", TS_F(shim.dma_out), kTarget, false, 1, 16},
      {"shim.buffer_descriptors", TS_F(shim.buffer_descriptors), kTarget, false, 1, 256},
      {"shim.locks", TS_F(shim.locks), kTarget, false, 1, 256},
      {"shim.bd_dims", TS_F(shim.bd_dims), "shim BDs are 3-D; mlir-aie", false, 1, 4},
      {"program_memory_bytes", TS_F(program_memory_bytes), "16 KiB program memory; mlir-aie target model", false, 1 * kKiB, 1024 * kKiB},
      {"bd_max_wrap", TS_F(bd_max_wrap), kAirNotes, false, 1, 1 << 20},
      {"bd_max_size", TS_F(bd_max_size), kAirNotes, false, 1, 1 << 20},
      {"bd_max_stride", TS_F(bd_max_stride), "mlir-aie BD stride field width (20 bits of elements)", false, 1, 1 << 30},
      {"bd_max_repeat", TS_F(bd_max_repeat), kAirNotes, false, 1, 255},
      {"bf16_innermost_stride_one", TS_F(bf16_innermost_stride_one), "mlir-air notes: BF16 DMA stride-1 rule", false, 0, 1},
      {"shim_burst_bytes", TS_F(shim_burst_bytes), "XDNA 2 shim burst up to 512 B (256 B on XDNA 1); hardware.md", false, 64, 4096},
      {"clock_hz", TS_F(clock_hz), "50 TOPS = 32 x 512 x 2 x f gives 1.526 GHz; 1.76 GHz measured; hardware.md", true, 1.5e9, 1.8e9},
      {"stream_bytes_per_cycle", TS_F(stream_bytes_per_cycle), "4 B/cycle measured on XDNA 1 (3.9997); XDNA 2 width unconfirmed", true, 4, 8},
      {"macs_per_cycle_bf16", TS_F(macs_per_cycle_bf16), "mlir-aie architecture reference 256; FastFlowLM 12 TFLOPS implies 128 (disputed)", true, 128, 256},
      {"macs_per_cycle_int8", TS_F(macs_per_cycle_int8), "mlir-aie architecture reference (8x8x8 int8)", false, 0, 4096},
      {"macs_per_cycle_bfp16", TS_F(macs_per_cycle_bfp16), "XDNA 2 block-FP16 rated like int8 (50 TOPS); 0 = unsupported", false, 0, 4096},
      {"vector_lanes_bf16", TS_F(vector_lanes_bf16), "32-lane bf16 vectors; hardware.md", false, 1, 256},
      {"ddr_bytes_per_second", TS_F(ddr_bytes_per_second), "FastFlowLM 60 GB/s; IRON GEMV 45 GB/s at 8 columns; memcpy 66.6 GB/s", true, 45e9, 66.6e9},
      {"dispatch_overhead_seconds", TS_F(dispatch_overhead_seconds), "IRON decode_costs_npu2.json 43.7-50.1 us; small ops 119-180 us", true, 35e-6, 180e-6},
      {"reconfigure_seconds", TS_F(reconfigure_seconds), "IRON: steps inside one packed dispatch 2.6-18 us", false, 0, 1e-3},
      {"mmul_m", TS_F(mmul_m), "XDNA 2 bf16 mmul instruction 4x8x8; hardware.md", false, 1, 64},
      {"mmul_k", TS_F(mmul_k), "XDNA 2 bf16 mmul instruction 4x8x8; hardware.md", false, 1, 64},
      {"mmul_n", TS_F(mmul_n), "XDNA 2 bf16 mmul instruction 4x8x8; hardware.md", false, 1, 64},
      {"mmul_loop_overhead_cycles", TS_F(mmul_loop_overhead_cycles), "estimate: per inner K loop of a 2x2 mmul block (mlir-aie mm.cc): accumulator load/store, loop prologue, mmul pipeline drain; tens of cycles, no published figure", true, 0, 128},
      {"vector_lanes_per_cycle", TS_F(vector_lanes_per_cycle), "32 bf16 lanes per vector op when fully vectorized (hardware.md); 1 = scalar code", true, 1, 32},
      {"gemv_macs_per_cycle", TS_F(gemv_macs_per_cycle), "mlir-aie mv.cc: one 32-lane bf16 MAC per cycle when fully vectorized (hardware.md); 1 = scalar code", true, 1, 32},
      {"vector_exp_ops", TS_F(vector_exp_ops), "estimate: exp as bf16 LUT lookups on AIE2 (mlir-aie lut_based_ops), exp2 instruction on AIE2P: ~2 elementwise ops", false, 1, 8},
      {"vector_inv_ops", TS_F(vector_inv_ops), "estimate: reciprocal / rsqrt (aie::inv, aie::invsqrt): ~2 elementwise ops", false, 1, 16},
      {"core_call_overhead_cycles", TS_F(core_call_overhead_cycles), "estimate: kernel call prologue + lock acquire/release, tens to hundreds of cycles in mlir-aie traces", true, 16, 2000},
      {"dma_object_overhead_cycles", TS_F(dma_object_overhead_cycles), "estimate: BD fetch + lock handshake per DMA object, a few to tens of cycles", true, 0, 256},
      {"host_bytes_per_second", TS_F(host_bytes_per_second), kHostBw, true, 2e9, 120e9},
      {"host_flops", TS_F(host_flops), "Ryzen AI 9 HX 370 (Zen 5): one core at 5.1 GHz x 32 fp32 FLOP/cycle = 163 GFLOPS; 12 cores ~1.5 TFLOPS", false, 10e9, 1.6e12},
      {"host_call_overhead_seconds", TS_F(host_call_overhead_seconds), "estimate: one host op or runtime call from C++ (us) to Python / numpy (tens of us)", true, 1e-6, 1e-3},
      {"host_sync_bytes_per_second", TS_F(host_sync_bytes_per_second), "mlir-air llama32_1b docs/profile.md (Strix, Llama-3.2-1B prefill): skipping the to-device sync of buffers the kernels overwrite (16 layers x 174 MiB = 2.92 GB of intermediates per prefill) saved 150 ms = 19.5 GB/s of cache maintenance over bytes the host never wrote; bounded by the 120 GB/s DDR", false, 2e9, 120e9},
      {"host_copy_bytes_per_second", TS_F(host_copy_bytes_per_second), "estimate: one Zen 5 core copying into / out of a mapped buffer object (streaming memcpy, read + write through the 120 GB/s LPDDR5X-7500); fitted to mlir-air's buffer-object write time", true, 5e9, 60e9},
  };
  return defs;
}
#undef TS_F

// XDNA 1 differs in a few published numbers; everything else is shared.
struct FamilyOverride {
  const char* name;
  const char* source;
  double min, max;
};
const std::vector<FamilyOverride>& xdna1_overrides() {
  static const std::vector<FamilyOverride> o = {
      {"columns", "Phoenix 4x5 physically, 4 columns usable; hardware.md", 1, 64},
      {"shim_burst_bytes", "XDNA 1 shim burst 256 B; hardware.md", 64, 4096},
      {"clock_hz", "no published XDNA 1 clock; 10 TOPS / (20 tiles x 256 x 2) = 0.98 GHz (derived)", 0.9e9, 1.6e9},
      {"macs_per_cycle_bf16", "XDNA 1: 128 bf16 MAC/cycle/tile (AM020)", 128, 128},
      {"macs_per_cycle_int8", "XDNA 1: 256 int8 MAC/cycle/tile (AM020)", 0, 4096},
      {"macs_per_cycle_bfp16", "XDNA 1 has no block-FP datapath (0 = unsupported)", 0, 4096},
  };
  return o;
}

const FieldDef* find_def(const std::string& name) {
  for (const auto& d : field_defs())
    if (name == d.name) return &d;
  return nullptr;
}

std::vector<FieldSource> build_sources(bool xdna1) {
  std::vector<FieldSource> out;
  for (const auto& d : field_defs()) out.push_back({d.name, d.source, d.calibratable, d.min, d.max});
  out.push_back({"kernel_efficiency", "per-kernel fraction of peak from published kernel measurements; default 1.0", true, 0.01, 1.0});
  if (xdna1)
    for (const auto& o : xdna1_overrides())
      for (auto& f : out)
        if (f.field == o.name) f.source = o.source, f.min = o.min, f.max = o.max;
  return out;
}

double as_double(const FieldRef& r) {
  return std::visit([](auto* p) { return static_cast<double>(*p); }, r);
}

void assign(const FieldRef& r, const nlohmann::json& v, const std::string& path) {
  bool ok = std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) return false;
        } else if constexpr (std::is_integral_v<T>) {
          if (!v.is_number_integer()) return false;
        } else if (!v.is_number()) {
          return false;
        }
        *p = v.get<T>();
        return true;
      },
      r);
  if (!ok) throw_error<DeviceSpecError>("device spec field '{}': wrong type ({})", path, v.dump());
}

// Walks a JSON object, descending into tile-kind groups ("compute": {...}).
void apply_overrides(DeviceSpec& s, const nlohmann::json& j, const std::string& prefix) {
  if (!j.is_object()) throw_error<DeviceSpecError>("device spec '{}': expected a JSON object", prefix);
  for (const auto& [key, v] : j.items()) {
    std::string path = prefix.empty() ? key : prefix + "." + key;
    if (path == "base") continue;
    if (path == "name" || path == "calibration") {
      if (!v.is_string())
        throw_error<DeviceSpecError>("device spec field '{}': expected a string", path);
      (path == "name" ? s.name : s.calibration) = v.get<std::string>();
    } else if (path == "constrained_kernels") {
      if (!v.is_array())
        throw_error<DeviceSpecError>("device spec field 'constrained_kernels': expected an array");
      s.constrained_kernels.clear();
      for (const auto& k : v) {
        if (!k.is_string())
          throw_error<DeviceSpecError>("device spec field 'constrained_kernels': expected strings");
        s.constrained_kernels.push_back(k.get<std::string>());
      }
    } else if (path == "kernel_efficiency") {
      if (!v.is_object()) throw_error<DeviceSpecError>("device spec field 'kernel_efficiency': expected an object");
      for (const auto& [k, e] : v.items()) {
        if (!e.is_number())
          throw_error<DeviceSpecError>("device spec field 'kernel_efficiency.{}': expected a number", k);
        s.kernel_efficiency[k] = e.get<double>();
      }
    } else if (v.is_object() && prefix.empty() && (key == "compute" || key == "mem" || key == "shim")) {
      apply_overrides(s, v, path);
    } else if (const FieldDef* d = find_def(path)) {
      assign(d->get(s), v, path);
    } else {
      throw_error<DeviceSpecError>("device spec: unknown field '{}'", path);
    }
  }
}

}  // namespace

const char* tile_kind_name(TileKind k) {
  switch (k) {
    case TileKind::shim: return "shim";
    case TileKind::mem: return "mem";
    case TileKind::compute: return "compute";
  }
  return "?";
}

TileKind DeviceSpec::kind_of_row(int row) const {
  if (row < shim_rows) return TileKind::shim;
  if (row < shim_rows + mem_rows) return TileKind::mem;
  return TileKind::compute;
}

const TileLimits& DeviceSpec::limits(TileKind k) const {
  switch (k) {
    case TileKind::shim: return shim;
    case TileKind::mem: return mem;
    case TileKind::compute: return compute;
  }
  return compute;
}

double DeviceSpec::efficiency(const std::string& kernel) const {
  auto it = kernel_efficiency.find(kernel);
  if (it != kernel_efficiency.end()) return it->second;
  it = kernel_efficiency.find("default");
  return it != kernel_efficiency.end() ? it->second : 1.0;
}

void DeviceSpec::validate() const {
  if (family != "xdna2" && family != "xdna1")
    throw_error<DeviceSpecError>("device spec '{}': unknown family '{}' (xdna2 | xdna1)", name, family);
  const auto& sources = field_sources(family);
  DeviceSpec self = *this;  // FieldDef accessors take a mutable spec; read a copy
  for (const auto& d : field_defs()) {
    double v = as_double(d.get(self));
    const FieldSource* src = nullptr;
    for (const auto& s : sources)
      if (s.field == d.name) src = &s;
    if (v < src->min || v > src->max)
      throw_error<DeviceSpecError>("device spec '{}': field '{}' = {} is outside [{}, {}] ({})", name,
                                   d.name, v, src->min, src->max, src->source);
  }
  if (!kernel_efficiency.count("default"))
    throw_error<DeviceSpecError>("device spec '{}': kernel_efficiency needs a 'default' entry", name);
  for (const auto& [k, e] : kernel_efficiency)
    if (!(e >= 0.01 && e <= 1.0))
      throw_error<DeviceSpecError>("device spec '{}': field 'kernel_efficiency.{}' = {} is outside [0.01, 1]",
                                   name, k, e);
}

namespace {

DeviceSpec sourced(const std::string& name, const std::string& family) {
  DeviceSpec s;
  s.name = name;
  s.family = family;
  s.columns = 8;
  s.compute_rows = 4;
  s.compute = {64 * 1024, 2, 2, 16, 16, 3};
  s.mem = {512 * 1024, 6, 6, 48, 64, 4};
  s.shim = {0, 2, 2, 16, 16, 3};
  s.program_memory_bytes = 16 * 1024;
  if (family == "xdna1") {
    s.columns = 4;
    s.shim_burst_bytes = 256;
    s.clock_hz = 1.0e9;
    s.macs_per_cycle_bf16 = 128;
    s.macs_per_cycle_int8 = 256;
    s.macs_per_cycle_bfp16 = 0;
  }
  return s;
}

const char* const kCalibratedJson =
#include "calibrated_spec.inc"
    ;

}  // namespace

DeviceSpec DeviceSpec::preset(const std::string& name) {
  if (name == "xdna2-sourced") return sourced(name, "xdna2");
  if (name == "xdna1") return sourced(name, "xdna1");
  if (name == "xdna2") {
    // Parsed once: from_json re-validates against the published ranges.
    static const DeviceSpec calibrated = [] {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(kCalibratedJson);
      } catch (const nlohmann::json::exception& e) {
        throw_error<DeviceSpecError>("built-in xdna2 calibration: malformed JSON: {}", e.what());
      }
      if (j.value("base", "") != "xdna2-sourced")
        throw_error<DeviceSpecError>("built-in xdna2 calibration must derive from xdna2-sourced");
      DeviceSpec s = from_json(j);
      s.name = "xdna2";
      return s;
    }();
    return calibrated;
  }
  throw_error<DeviceSpecError>("unknown device preset '{}' (xdna2 | xdna2-sourced | xdna1)", name);
}

const std::vector<std::string>& DeviceSpec::preset_names() {
  static const std::vector<std::string> names = {"xdna2", "xdna2-sourced", "xdna1"};
  return names;
}

DeviceSpec DeviceSpec::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw_error<DeviceSpecError>("device spec: expected a JSON object");
  std::string base = "xdna2";
  if (j.contains("base")) {
    if (!j["base"].is_string()) throw_error<DeviceSpecError>("device spec field 'base': expected a string");
    base = j["base"].get<std::string>();
  }
  DeviceSpec s = preset(base);  // name defaults to the base preset's
  apply_overrides(s, j, "");
  s.validate();
  return s;
}

DeviceSpec DeviceSpec::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_error<FileError>("cannot open device spec '{}'", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw_error<DeviceSpecError>("device spec '{}': malformed JSON: {}", path, e.what());
  }
  try {
    return from_json(j);
  } catch (const DeviceSpecError& e) {
    throw_error<DeviceSpecError>("{}: {}", path, e.what());
  }
}

nlohmann::json DeviceSpec::to_json() const {
  nlohmann::json j;
  // The sourced preset of the family, so that a saved spec never depends on
  // the calibration compiled into this binary.
  j["base"] = family == "xdna2" ? "xdna2-sourced" : family;
  j["name"] = name;
  j["calibration"] = calibration;
  j["constrained_kernels"] = constrained_kernels;
  DeviceSpec self = *this;  // see validate()
  for (const auto& d : field_defs()) {
    std::string path = d.name;
    nlohmann::json* node = &j;
    if (auto dot = path.find('.'); dot != std::string::npos) {
      node = &j[path.substr(0, dot)];
      path = path.substr(dot + 1);
    }
    std::visit([&](auto* p) { (*node)[path] = *p; }, d.get(self));
  }
  j["kernel_efficiency"] = kernel_efficiency;
  return j;
}

const std::vector<FieldSource>& field_sources() { return field_sources("xdna2"); }

const std::vector<FieldSource>& field_sources(const std::string& family) {
  static const std::vector<FieldSource> x2 = build_sources(false);
  static const std::vector<FieldSource> x1 = build_sources(true);
  if (family == "xdna1") return x1;
  if (family == "xdna2") return x2;
  throw_error<DeviceSpecError>("unknown device family '{}' (xdna2 | xdna1)", family);
}

}  // namespace tessera::npu
