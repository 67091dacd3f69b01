#pragma once
// Design builders: given an operator instance (op name + logical dims) and the
// DeviceSpec, emit a validated npu::Design that tiles the op over the array,
// plus the host-side packing of its logical tensors. Every shape the presets
// need must build: dimensions that do not divide the tiling are handled by
// padding or remainder tiles that are numerically exact - never by garbage.
//
// Logical tensors are row-major FP32 values on the CPU side; pack() rounds them
// to bf16 (RNE) and lays them out as the design's host buffers want (padded,
// blocked); unpack() reads an output back to logical row-major FP32. Weights
// go through pack() too: at deploy time the packed bytes are what is stored.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/npu/design.h"
#include "tessera/npu/device_spec.h"
#include "tessera/npu/simulator.h"
#include "tessera/npu/timing.h"

namespace tessera::kernels {

// One operator instance. dims are named per op (see each builder's header);
// attrs carry real-valued attributes (eps, rope theta, attention scale).
struct OpShape {
  std::string op;
  std::map<std::string, int64_t> dims;
  std::map<std::string, double> attrs;
  int64_t dim(const std::string& key) const;  // throws UsageError naming op and key
  double attr(const std::string& key, double fallback) const;
  std::string key() const;  // stable: "linear K=2048 M=17 N=8192"
};

struct OpTensor {
  std::string name;  // named like the oracle's taps where one exists ("x", "w", "q", ...)
  Shape shape;
};

// Tile sizes and choices; empty = the builder's default for the shape. Later
// compiler passes (tune-tiles) set these from the timing model.
using TileOptions = std::map<std::string, int64_t>;

struct BuiltOp {
  OpShape shape;
  npu::Design design;  // already validated against the spec
  std::vector<OpTensor> inputs;
  std::vector<OpTensor> outputs;
  // Pack logical input i (row-major FP32, numel of inputs[i].shape) into `host`.
  std::function<void(size_t input, std::span<const float> values, npu::HostMemory& host)> pack;
  // pack(), for a caller whose host buffers already hold the packed rows
  // before `first_row` of input i (a resident KV cache kept between decode
  // steps): those rows are not written again. Inputs without such rows pack
  // whole. Unset where the builder has no row-wise pack.
  std::function<void(size_t input, std::span<const float> values, npu::HostMemory& host, int64_t first_row)>
      pack_rows;
  // Read logical output i back as row-major FP32.
  std::function<std::vector<float>(size_t output, const npu::HostMemory& host)> unpack;
  // Rows [first, first + count) of output i, each numel / shape[0] wide, as
  // unpack() would give them, without the others: a decode step needs only
  // the new rows of a KV cache of T rows. Unset where the layout has no
  // cheap row access (callers then slice unpack()).
  std::function<std::vector<float>(size_t output, const npu::HostMemory& host, int64_t first, int64_t count)>
      unpack_rows;
  TileOptions tiles;  // the tile sizes actually chosen
  // Runtime arguments, as XRT hands them to a runtime sequence: when set,
  // run_op calls it after pack() and runs the design it returns, in which DMA
  // offsets that depend on packed input values are filled in (embedding ids
  // select table rows). `design` holds the same transfers with those offsets
  // at 0, so validation and timing do not depend on the values.
  std::function<npu::Design(const npu::Design& design, const npu::HostMemory& host)> patch;
};

class OpBuilder {
 public:
  virtual ~OpBuilder() = default;
  virtual std::string op() const = 0;
  // Throws LimitError naming the op, the shape and the limit when it cannot
  // build (e.g. a head_dim the kernel does not support).
  virtual BuiltOp build(const OpShape& shape, const npu::DeviceSpec& spec,
                        const TileOptions& tiles = {}) const = 0;
  // Tile options worth timing for `shape` (kernels/tile_search.h). Each may
  // still fail to build; the search drops those. Default: none besides the
  // builder's own default choice.
  virtual std::vector<TileOptions> tile_candidates(const OpShape& shape,
                                                   const npu::DeviceSpec& spec) const;
};

// Registry of builders by op name (each builder file registers itself).
void register_op_builder(std::unique_ptr<OpBuilder> b);
const OpBuilder& op_builder(const std::string& op);  // throws UsageError listing ops
std::vector<std::string> op_names();

// Build + pack + simulate + unpack: the phase-1 gate and tests use this.
struct OpRun {
  std::vector<std::vector<float>> outputs;
  npu::SimStats stats;
};
OpRun run_op(const BuiltOp& built, const std::vector<std::vector<float>>& inputs,
             const npu::DeviceSpec& spec);

}  // namespace tessera::kernels
