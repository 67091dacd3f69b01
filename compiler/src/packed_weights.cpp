// Deploy-time weight packing (packed_weights.h): every layout key the plans
// use, packed once by the design that reads it, stored as one safetensors file.
#include "tessera/compiler/packed_weights.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/model/mapped_pages.h"
#include "tessera/model/safetensors.h"
#include "tessera/model/safetensors_stream.h"
#include "tessera/model/tensor_table.h"

namespace tessera::compiler {
namespace {

constexpr const char* kFormat = "tessera-packed-weights";
constexpr const char* kVersion = "1";

std::string abbreviated(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 6; ++i) out += (i ? ", " : "") + keys[i];
  if (keys.size() > 6) out += fmt::format(", ... ({} in all)", keys.size());
  return keys.empty() ? std::string("none") : out;
}

// Every buffer is bf16 data (the designs' weight buffers have 2-byte
// elements), so it is stored as a 1-D BF16 tensor: any safetensors tool can
// read it, and the reader supports no byte dtype.
void check_even(const std::string& key, const std::string& name, size_t bytes) {
  if (bytes % 2) throw_error<InternalError>("packed weights: buffer {}/{} has an odd size {}", key, name, bytes);
}

// A key and a buffer name are joined by '/' in the file.
void check_key(const std::string& key) {
  if (key.find('/') != std::string::npos)
    throw_error<UsageError>("packed weights: layout key '{}' must not contain '/'", key);
}

std::map<std::string, std::string> metadata(const std::string& model, const std::string& spec) {
  return {{"format", kFormat}, {"version", kVersion}, {"model", model}, {"spec", spec}};
}

}  // namespace

std::span<std::byte> PackedBuffer::mutable_bytes() {
  if (mapped_) {
    const std::span<const std::byte> b = bytes();
    owned_.assign(b.begin(), b.end());
    mapped_.reset();
    view_ = {};
  }
  return owned_;
}

void PackedBuffer::release_pages() const {
  if (mapped_) model::release_mapped_pages(*mapped_);
}

bool operator==(const PackedBuffer& a, const PackedBuffer& b) {
  return std::ranges::equal(a.bytes(), b.bytes());
}

bool PackedWeights::contains(const std::string& layout_key) const {
  return layouts_.count(layout_key) != 0;
}

const PackedWeights::Buffers* PackedWeights::find(const std::string& layout_key) const {
  auto it = layouts_.find(layout_key);
  return it == layouts_.end() ? nullptr : &it->second;
}

const PackedWeights::Buffers& PackedWeights::get(const std::string& layout_key) const {
  auto it = layouts_.find(layout_key);
  if (it == layouts_.end())
    throw_error<InputError>("packed weights{}: no layout '{}' (has: {})",
                            source_.empty() ? "" : " " + source_, layout_key,
                            abbreviated(keys()));
  return it->second;
}

PackedWeights::Buffers& PackedWeights::get_mut(const std::string& layout_key) {
  get(layout_key);  // same error for a missing key
  return layouts_.at(layout_key);
}

void PackedWeights::add(const std::string& layout_key, Buffers buffers) {
  check_key(layout_key);
  if (!layouts_.emplace(layout_key, std::move(buffers)).second)
    throw_error<UsageError>("packed weights: layout '{}' added twice", layout_key);
}

std::vector<std::string> PackedWeights::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : layouts_) out.push_back(k);
  return out;
}

int64_t PackedWeights::bytes() const {
  int64_t n = 0;
  for (const auto& [k, bufs] : layouts_)
    for (const auto& [name, b] : bufs) n += static_cast<int64_t>(b.size());
  return n;
}

int64_t PackedWeights::mapped_bytes() const {
  int64_t n = 0;
  for (const auto& [k, bufs] : layouts_)
    for (const auto& [name, b] : bufs) n += b.mapped() ? static_cast<int64_t>(b.size()) : 0;
  return n;
}

void PackedWeights::release_pages() const {
  for (const auto& [k, bufs] : layouts_) release_pages(k);
}

void PackedWeights::release_pages(const std::string& layout_key) const {
  for (const auto& [name, b] : get(layout_key)) b.release_pages();
}

bool PackedWeights::keep_resident(const Plan& plan, int64_t limit) {
  std::set<std::string> keys;
  for (const Step& s : plan.steps)
    for (const Launch& l : s.launches)
      for (const std::string& key : l.weight_layouts)
        if (!key.empty() && contains(key)) keys.insert(key);
  keys.insert(resident_.begin(), resident_.end());
  int64_t bytes = 0;
  for (const std::string& key : keys)
    for (const auto& [name, b] : get(key)) bytes += static_cast<int64_t>(b.size());
  if (bytes > limit) return false;
  resident_ = std::move(keys);
  return true;
}

void PackedWeights::check_covers(const std::vector<const Plan*>& plans) const {
  const std::string where = source_.empty() ? std::string("packed weights") : source_;
  for (const Plan* p : plans) {
    if (p->model != model || p->spec != spec)
      throw_error<InputError>("{}: packed for model '{}' on '{}', the plan is '{}' on '{}'", where,
                              model, spec, p->model, p->spec);
    for (const Step& s : p->steps)
      for (const Launch& l : s.launches)
        for (const std::string& key : l.weight_layouts)
          if (!key.empty() && !contains(key))
            throw_error<InputError>("{}: layout '{}' (step {}) is missing", where, key, l.name);
  }
}

void PackedWeights::save(const std::filesystem::path& file) const {
  std::vector<model::SafetensorsWriteEntry> entries;
  std::vector<const PackedBuffer*> data;
  for (const auto& [key, bufs] : layouts_)
    for (const auto& [name, b] : bufs) {
      check_even(key, name, b.size());
      entries.push_back({key + "/" + name, DType::bf16, {static_cast<int64_t>(b.size() / 2)}});
      data.push_back(&b);
    }
  model::write_safetensors(
      file, entries,
      [&](size_t index, uint64_t offset, std::span<std::byte> out) {
        std::memcpy(out.data(), data[index]->data() + offset, out.size());
      },
      metadata(model, spec));
}

PackedWeights PackedWeights::load(const std::filesystem::path& file) {
  const model::SafetensorsFile f = model::SafetensorsFile::open(file);
  const auto& meta = f.header().metadata;
  auto field = [&](const char* k) {
    auto it = meta.find(k);
    return it == meta.end() ? std::string() : it->second;
  };
  if (field("format") != kFormat || field("version") != kVersion)
    throw_error<SafetensorsError>("{}: not a tessera packed-weights file (metadata format '{}' "
                                  "version '{}', want '{}' version '{}')",
                                  file.string(), field("format"), field("version"), kFormat,
                                  kVersion);
  PackedWeights pw;
  pw.model = field("model");
  pw.spec = field("spec");
  pw.source_ = file.string();
  if (pw.model.empty() || pw.spec.empty())
    throw_error<SafetensorsError>("{}: packed-weights metadata lacks the model or spec name",
                                  file.string());
  for (const auto& e : f.header().entries) {
    const size_t slash = e.name.rfind('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == e.name.size() ||
        e.dtype != DType::bf16 || e.shape.size() != 1)
      throw_error<SafetensorsError>("{}: tensor '{}' is not '<layout key>/<buffer>' as 1-D BF16",
                                    file.string(), e.name);
    // The view keeps the mapping alive. (The reader copies a tensor at an odd
    // file offset, legal in the format though save never writes one: such a
    // copy is owned memory, whose release_pages does nothing.)
    pw.layouts_[e.name.substr(0, slash)][e.name.substr(slash + 1)] =
        PackedBuffer(std::make_shared<const Tensor>(f.tensor(e)));
  }
  pw.release_after_use = pw.bytes() > kResidentAllowance;
  return pw;
}

// ---------------------------------------------------------------- pack_weights

namespace {

// Where a layout key is first read: the launch and input that define its packing.
struct KeyUse {
  std::string key;
  const Launch* launch = nullptr;
  bool host = false;
  size_t input = 0;
  ValueRef weight;
};

const model::TensorSpec& weight_spec(const model::ModelConfig& c, const ValueRef& w,
                                     const std::vector<model::TensorSpec>& specs) {
  for (const auto& s : specs)
    if (s.layer == w.layer && w.name == model::role_name(s.role)) return s;
  throw_error<TensorError>("{}: no weight tensor for {} in the tensor table", c.name, w.str());
}

std::vector<float> weight_values(const model::ModelConfig& c, const model::Weights& weights,
                                 const model::TensorSpec& spec, int64_t want_numel) {
  const Tensor& t = weights.get(spec.name);
  if (t.numel() != want_numel)
    throw_error<TensorError>("{}: tensor {} has shape {} ({} values), the design reads {}", c.name,
                             spec.name, shape_str(t.shape()), t.numel(), want_numel);
  return t.to_f32_vector();
}

PackedWeights::Buffers pack_one(const KeyUse& u, std::vector<float> values) {
  PackedWeights::Buffers out;
  if (u.host) {  // "@table": plain row-major bf16
    std::vector<std::byte> b(values.size() * 2);
    f32_to_bf16(values, std::span<bf16>(reinterpret_cast<bf16*>(b.data()), values.size()));
    out.emplace("table", std::move(b));
    return out;
  }
  npu::HostMemory host;  // empty: only the buffers this weight fills appear
  u.launch->op->pack(u.input, values, host);
  for (auto& [name, b] : host) out.emplace(name, std::move(b));
  return out;
}

// Each layout key once, with the launch and input that define its packing,
// in key order (the order save() writes, so a streamed file matches it).
std::vector<KeyUse> key_uses(const std::vector<const Plan*>& plans) {
  std::vector<KeyUse> uses;
  std::set<std::string> seen;
  for (const Plan* p : plans)
    for (const Step& s : p->steps)
      for (const Launch& l : s.launches)
        for (size_t k = 0; k < l.weight_layouts.size(); ++k)
          if (!l.weight_layouts[k].empty() && seen.insert(l.weight_layouts[k]).second)
            uses.push_back({l.weight_layouts[k], &l, s.kind == StepKind::host, k,
                            p->graph.nodes[l.node].inputs.at(k)});
  std::sort(uses.begin(), uses.end(), [](const KeyUse& a, const KeyUse& b) { return a.key < b.key; });
  return uses;
}

// An upper bound on the header write_packed_weights writes: every host buffer
// a key's design declares could be one of its tensors, each entry's numbers
// at their widest (20 digits).
uint64_t header_bound(const std::vector<KeyUse>& uses, const std::string& model, const std::string& spec) {
  constexpr uint64_t kEntry = 160;  // "":{"dtype":"BF16","shape":[N],"data_offsets":[A,B]}, : under 80 + 3 x 20 digits
  uint64_t n = 256 + model.size() + spec.size();
  for (const KeyUse& u : uses) {
    if (u.host) {
      n += u.key.size() + 8 + kEntry;
      continue;
    }
    for (const npu::HostBuffer& h : u.launch->op->design.host_buffers) n += u.key.size() + h.name.size() + 4 + kEntry;
  }
  return n;
}

}  // namespace

void for_each_packed(const std::vector<const Plan*>& plans, const model::ModelConfig& config,
                     const model::Weights& weights,
                     const std::function<void(const std::string& key, PackedWeights::Buffers&& buffers)>& visit,
                     const std::function<void(size_t, size_t)>& progress) {
  const std::vector<KeyUse> uses = key_uses(plans);
  const std::vector<model::TensorSpec> specs = model::tensor_specs(config);
  for (size_t i = 0; i < uses.size(); ++i) {
    const KeyUse& u = uses[i];
    const model::TensorSpec& spec = weight_spec(config, u.weight, specs);
    const int64_t numel = u.host
                              ? shape_numel(spec.shape)
                              : shape_numel(u.launch->op->inputs.at(u.input).shape);
    visit(u.key, pack_one(u, weight_values(config, weights, spec, numel)));
    if (progress) progress(i + 1, uses.size());
  }
}

PackedWeights pack_weights(const std::vector<const Plan*>& plans, const model::ModelConfig& config,
                           const model::Weights& weights,
                           const std::function<void(size_t, size_t)>& progress) {
  PackedWeights pw;
  pw.model = config.name;
  pw.spec = plans.empty() ? std::string() : plans.front()->spec;
  for_each_packed(
      plans, config, weights,
      [&](const std::string& key, PackedWeights::Buffers&& buffers) { pw.add(key, std::move(buffers)); },
      progress);
  return pw;
}

void write_packed_weights(const std::filesystem::path& file, const std::vector<const Plan*>& plans,
                          const model::ModelConfig& config, const model::Weights& weights,
                          const std::function<void(size_t, size_t)>& progress) {
  const std::string spec = plans.empty() ? std::string() : plans.front()->spec;
  model::SafetensorsStreamWriter w(file, header_bound(key_uses(plans), config.name, spec));
  for_each_packed(
      plans, config, weights,
      [&](const std::string& key, PackedWeights::Buffers&& buffers) {
        check_key(key);
        for (const auto& [name, b] : buffers) {
          check_even(key, name, b.size());
          w.add(key + "/" + name, DType::bf16, {static_cast<int64_t>(b.size() / 2)}, b.bytes());
        }
      },
      progress);
  w.finish(metadata(config.name, spec));
}

}  // namespace tessera::compiler
