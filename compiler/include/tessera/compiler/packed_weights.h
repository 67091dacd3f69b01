#pragma once
// Weights converted once, at deploy time, into the bytes the designs read:
// for every weight layout key a set of plans uses (plan.h weight_layout_key),
// the host buffers BuiltOp::pack() writes for that weight (bf16, tiled and
// padded as the builder wants). At run time those buffers are swapped into
// the simulator's host memory by name: nothing is re-laid-out.
//
// On disk: one safetensors file (model/safetensors.h writer, one 1-D BF16
// tensor per (layout key, host buffer): "<layout key>/<buffer name>"; BF16
// rather than U8 because every weight buffer holds bf16 elements and the
// reader supports no byte dtype) with
// __metadata__ {"format": "tessera-packed-weights", "version": "1", "model":
// name, "spec": DeviceSpec name}. Loading checks the metadata and that every
// key a plan needs is present, throwing InputError naming the file and key.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/compiler/plan.h"
#include "tessera/model/weights.h"
#include "tessera/npu/simulator.h"

namespace tessera::compiler {

class PackedWeights {
 public:
  // The host buffers of one layout key, by design host-buffer name.
  using Buffers = std::map<std::string, std::vector<std::byte>>;

  bool contains(const std::string& layout_key) const;
  // Throws InputError naming the key (and the keys it has, abbreviated).
  const Buffers& get(const std::string& layout_key) const;
  Buffers& get_mut(const std::string& layout_key);
  void add(const std::string& layout_key, Buffers buffers);  // UsageError on duplicate
  std::vector<std::string> keys() const;
  int64_t bytes() const;
  std::string model, spec;

  void save(const std::filesystem::path& file) const;
  static PackedWeights load(const std::filesystem::path& file);
  // Throws InputError naming the file (when loaded) and the first layout key a
  // plan needs that is missing, or a model / spec that differs from the plans'.
  void check_covers(const std::vector<const Plan*>& plans) const;

 private:
  std::map<std::string, Buffers> layouts_;
  std::string source_;  // the file it was loaded from, for messages
};

// Packs every weight layout the plans need (each key once, whatever the
// number of plans / layers sharing it). progress(done, total) is called per
// key. Throws TensorError for a weight missing from `weights`.
PackedWeights pack_weights(const std::vector<const Plan*>& plans, const model::ModelConfig& config,
                           const model::Weights& weights,
                           const std::function<void(size_t, size_t)>& progress = {});

}  // namespace tessera::compiler
