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
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "tessera/compiler/plan.h"
#include "tessera/model/weights.h"
#include "tessera/npu/simulator.h"

namespace tessera::compiler {

// The bytes of one packed host buffer: a read-only view into the mapped
// packed-weights file (load) or memory of its own (pack_weights, or a view
// made writable by mutable_bytes). A deployment's weights are as large as the
// model; viewing them where the file is mapped keeps a second copy out of RAM.
class PackedBuffer {
 public:
  PackedBuffer() = default;
  PackedBuffer(std::vector<std::byte> owned) : owned_(std::move(owned)) {}  // NOLINT: implicit by design
  // A tensor of the mapped file (its view keeps the mapping alive).
  explicit PackedBuffer(std::shared_ptr<const Tensor> mapped)
      : mapped_(std::move(mapped)), view_(mapped_->bytes(), mapped_->nbytes()) {}

  // A mapped buffer's span is kept here: the executor views every weight
  // buffer of a launch per token, and reading it through the tensor was a
  // cache miss per buffer.
  std::span<const std::byte> bytes() const { return mapped_ ? view_ : std::span<const std::byte>(owned_); }
  const std::byte* data() const { return bytes().data(); }
  size_t size() const { return bytes().size(); }
  bool mapped() const { return mapped_ != nullptr; }
  // Writable bytes; a mapped buffer is first copied into memory of its own
  // (test hooks that plant a wrong weight touch only the buffers they edit).
  std::span<std::byte> mutable_bytes();
  // Drops the pages of a mapped buffer from this process's resident set (they
  // stay in the page cache and fault back in when read again); no-op when owned.
  void release_pages() const;
  friend bool operator==(const PackedBuffer& a, const PackedBuffer& b);

 private:
  std::vector<std::byte> owned_;
  std::shared_ptr<const Tensor> mapped_;
  std::span<const std::byte> view_;  // of mapped_
};

class PackedWeights {
 public:
  // The host buffers of one layout key, by design host-buffer name.
  using Buffers = std::map<std::string, PackedBuffer>;

  bool contains(const std::string& layout_key) const;
  // The buffers of a key, or nullptr: one lookup where contains() + get() took two.
  const Buffers* find(const std::string& layout_key) const;
  // Throws InputError naming the key (and the keys it has, abbreviated).
  const Buffers& get(const std::string& layout_key) const;
  Buffers& get_mut(const std::string& layout_key);
  void add(const std::string& layout_key, Buffers buffers);  // UsageError on duplicate
  std::vector<std::string> keys() const;
  int64_t bytes() const;
  int64_t mapped_bytes() const;  // of bytes(): viewed in the mapped file
  // PackedBuffer::release_pages of every buffer (or of one layout's): a phase
  // done with the weights gives their pages back, so peak RSS holds one
  // working set.
  void release_pages() const;
  void release_pages(const std::string& layout_key) const;
  // Whether an executor releases each step's weight pages once the step ran:
  // a model whose packed weights do not fit beside everything else streams
  // them from the page cache (a minor fault per page per use) instead of
  // keeping them all resident.
  // load() sets it for a file larger than kResidentAllowance.
  bool release_after_use = false;
  // Packed weights up to this size stay resident once read (the fixed part of
  // a deploy's memory budget, issue 16): re-faulting them every token would
  // cost a small model more host time than the memory is worth.
  static constexpr int64_t kResidentAllowance = int64_t{2} << 30;
  // Exempts the layouts `plan` reads from release_after_use when they total
  // at most `limit` bytes (with those kept already): a process that runs one
  // plan per token (run, chat, serve: the decode plan) keeps that working set
  // resident instead of faulting it in again every token. False, nothing
  // kept, when they do not fit.
  bool keep_resident(const Plan& plan, int64_t limit);
  // Whether an executor releases `layout_key`'s pages after a step used it.
  bool releases(const std::string& layout_key) const {
    return release_after_use && !resident_.count(layout_key);
  }
  std::string model, spec;

  void save(const std::filesystem::path& file) const;
  // Maps the file: every buffer is a view into the mapping (no copy), which
  // lives as long as any buffer of the result (or a copy of it); sets
  // release_after_use when the file exceeds kResidentAllowance.
  static PackedWeights load(const std::filesystem::path& file);
  // Throws InputError naming the file (when loaded) and the first layout key a
  // plan needs that is missing, or a model / spec that differs from the plans'.
  void check_covers(const std::vector<const Plan*>& plans) const;

 private:
  std::map<std::string, Buffers> layouts_;
  std::set<std::string> resident_;  // keep_resident's layouts
  std::string source_;  // the file it was loaded from, for messages
};

// Packs every weight layout the plans need (each key once, whatever the
// number of plans / layers sharing it), in key order, handing each key's
// buffers to `visit` and dropping them after: memory holds one key at a time.
// progress(done, total) is called per key. Throws TensorError for a weight
// missing from `weights`.
void for_each_packed(const std::vector<const Plan*>& plans, const model::ModelConfig& config,
                     const model::Weights& weights,
                     const std::function<void(const std::string& key, PackedWeights::Buffers&& buffers)>& visit,
                     const std::function<void(size_t, size_t)>& progress = {});

// for_each_packed into memory (tests, small models).
PackedWeights pack_weights(const std::vector<const Plan*>& plans, const model::ModelConfig& config,
                           const model::Weights& weights,
                           const std::function<void(size_t, size_t)>& progress = {});

// for_each_packed straight into `file` (the format PackedWeights::save
// writes, header padded to the room reserved before the data): a deploy never
// holds the packed model in memory. PackedWeights::load(file) equals
// pack_weights(...) of the same arguments.
void write_packed_weights(const std::filesystem::path& file, const std::vector<const Plan*>& plans,
                          const model::ModelConfig& config, const model::Weights& weights,
                          const std::function<void(size_t, size_t)>& progress = {});

}  // namespace tessera::compiler
