// Packed weights: each layout key packed once by the design that reads it, the
// packed bytes usable in place of pack() on the simulator, and the on-disk
// format (round trip, foreign and corrupted files, missing keys).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "tessera/compiler/packed_weights.h"
#include "tessera/core/error.h"
#include "tessera/model/safetensors.h"
#include "tessera/model/tensor_table.h"

namespace tessera::compiler {
namespace {

namespace fs = std::filesystem;

// Deterministic weights for every tensor of `c`, stored as bf16 like a real checkpoint.
model::Weights make_weights(const model::ModelConfig& c) {
  model::Weights w;
  uint32_t seed = 1;
  for (const auto& spec : model::tensor_specs(c)) {
    std::vector<float> v(static_cast<size_t>(shape_numel(spec.shape)));
    for (auto& x : v) {
      seed = seed * 1664525u + 1013904223u;
      x = static_cast<float>(static_cast<int32_t>(seed >> 8) % 2001 - 1000) / 1000.f;
    }
    w.add(spec.name, Tensor::from_f32(spec.shape, v).to(DType::bf16));
  }
  return w;
}

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() /
                     ("tessera_packed_" + std::to_string(::testing::UnitTest::GetInstance()
                                                             ->random_seed()) +
                      "_" + std::to_string(reinterpret_cast<uintptr_t>(&temp_dir)));
  fs::create_directories(d);
  return d;
}

struct Fixture {
  model::ModelConfig config = model::preset("tiny");
  model::Weights weights;
  DesignCache cache{npu::DeviceSpec::preset("xdna2")};
  Plan prefill, decode;
  explicit Fixture(PlanStyle style) {
    config.num_layers = 2;
    weights = make_weights(config);
    PlanOptions o;
    o.style = style;
    prefill = lower(config, 9, 0, cache, o);
    decode = lower(config, 1, 9, cache, o);
  }
  std::vector<const Plan*> plans() const { return {&prefill, &decode}; }
};

std::set<std::string> keys_of(const std::vector<const Plan*>& plans) {
  std::set<std::string> out;
  for (const Plan* p : plans)
    for (const Step& s : p->steps)
      for (const Launch& l : s.launches)
        for (const auto& k : l.weight_layouts)
          if (!k.empty()) out.insert(k);
  return out;
}

TEST(PackWeights, EveryKeyOnceWithProgress) {
  Fixture f(PlanStyle::per_op);
  std::vector<std::pair<size_t, size_t>> calls;
  const PackedWeights pw =
      pack_weights(f.plans(), f.config, f.weights, [&](size_t d, size_t t) { calls.push_back({d, t}); });
  const auto want = keys_of(f.plans());
  const auto got = pw.keys();
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
  ASSERT_EQ(calls.size(), want.size());
  EXPECT_EQ(calls.back(), std::make_pair(want.size(), want.size()));
  EXPECT_EQ(pw.model, "tiny");
  EXPECT_EQ(pw.spec, "xdna2");
  // Tied embeddings: the LM head packs embed_tokens in its GEMV layout, the
  // embedding step in its own: two keys for one tensor.
  int embed_keys = 0;
  for (const auto& k : got) embed_keys += k.rfind("w:embed_tokens@", 0) == 0;
  EXPECT_EQ(embed_keys, 2);
  EXPECT_THROW(pw.get("w:L0.q_proj@00000000"), InputError);
  pw.check_covers(f.plans());
}

// The packed buffers replace pack() of the weight: the simulator gives the
// same output as run_op with the logical weight.
TEST(PackWeights, PackedBuffersRunLikePack) {
  Fixture f(PlanStyle::standard);
  const PackedWeights pw = pack_weights(f.plans(), f.config, f.weights);
  for (const Plan* p : f.plans()) {
    for (const char* name : {"L1.q", "L0.attn_norm", "logits"}) {
      const Launch* st = nullptr;
      for (const Step& s : p->steps)
        for (const Launch& l : s.launches)
          if (l.name == name) st = &l;
      ASSERT_NE(st, nullptr) << name;
      const kernels::BuiltOp& op = *st->op;
      const Node& node = p->graph.nodes[st->node];
      std::vector<std::vector<float>> in;
      npu::HostMemory host;
      for (const auto& h : op.design.host_buffers)
        host[h.name].assign(static_cast<size_t>(h.bytes), std::byte{0});
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        std::vector<float> v(static_cast<size_t>(shape_numel(op.inputs[i].shape)));
        if (node.inputs[i].kind == ValueKind::weight) {
          const auto& spec_name = [&] {
            for (const auto& s : model::tensor_specs(f.config))
              if (s.layer == node.inputs[i].layer && node.inputs[i].name == model::role_name(s.role))
                return s.name;
            return std::string();
          }();
          v = f.weights.get(spec_name).to_f32_vector();
          for (const auto& [buf, bytes] : pw.get(st->weight_layouts[i])) host[buf].assign(bytes.data(), bytes.data() + bytes.size());
        } else {
          for (size_t e = 0; e < v.size(); ++e) v[e] = std::sin(0.37f * static_cast<float>(e));
          op.pack(i, v, host);
        }
        in.push_back(std::move(v));
      }
      const auto ref = kernels::run_op(op, in, f.cache.spec());
      npu::Simulator sim(f.cache.spec(), npu::KernelRegistry::global());
      sim.run(op.design, host);
      EXPECT_EQ(op.unpack(0, host), ref.outputs[0]) << name << " S=" << p->seq;
    }
  }
}

TEST(PackWeights, HostTableIsRowMajorBf16) {
  Fixture f(PlanStyle::standard);
  const PackedWeights pw = pack_weights(f.plans(), f.config, f.weights);
  const auto& bufs = pw.get("w:embed_tokens@table");
  ASSERT_EQ(bufs.size(), 1u);
  const Tensor& t = f.weights.get(model::tensor_name(f.config, model::WeightRole::embed_tokens));
  ASSERT_EQ(bufs.at("table").size(), t.nbytes());
  EXPECT_EQ(std::memcmp(bufs.at("table").data(), t.bytes(), t.nbytes()), 0);
}

TEST(PackWeights, MissingWeightIsATensorError) {
  Fixture f(PlanStyle::standard);
  model::Weights partial;
  for (const auto& n : f.weights.names())
    if (n.find("layers.1.mlp.down_proj") == std::string::npos) partial.add(n, f.weights.get(n));
  try {
    pack_weights(f.plans(), f.config, partial);
    FAIL() << "missing tensor must throw";
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("layers.1.mlp.down_proj"), std::string::npos) << e.what();
  }
}

TEST(PackedWeightsFile, RoundTripsAndChecksCoverage) {
  Fixture f(PlanStyle::standard);
  const PackedWeights pw = pack_weights(f.plans(), f.config, f.weights);
  const fs::path file = temp_dir() / "packed.safetensors";
  pw.save(file);
  const PackedWeights back = PackedWeights::load(file);
  EXPECT_EQ(back.model, pw.model);
  EXPECT_EQ(back.spec, pw.spec);
  ASSERT_EQ(back.keys(), pw.keys());
  for (const auto& k : pw.keys()) EXPECT_EQ(back.get(k), pw.get(k)) << k;
  EXPECT_EQ(back.bytes(), pw.bytes());
  back.check_covers(f.plans());
  // A plan that needs a layout the file lacks (another model) names the file.
  model::ModelConfig other = f.config;
  other.num_layers = 3;
  DesignCache cache(npu::DeviceSpec::preset("xdna2"));
  const Plan bigger = lower(other, 9, 0, cache);
  try {
    back.check_covers({&bigger});
    FAIL() << "a missing layout must throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("w:L2."), std::string::npos) << e.what();
  }
  fs::remove_all(file.parent_path());
}

// run / chat / serve keep the decode plan's layouts resident when they fit
// the limit; the prefill-only layouts are still released after use, and a
// limit one byte short keeps nothing.
TEST(PackedWeights, KeepResidentExemptsOnePlansLayoutsWithinTheLimit) {
  Fixture f(PlanStyle::standard);
  PackedWeights pw = pack_weights(f.plans(), f.config, f.weights);
  pw.release_after_use = true;
  const std::set<std::string> decode_keys = keys_of({&f.decode});
  int64_t decode_bytes = 0;
  for (const auto& k : decode_keys)
    for (const auto& [name, b] : pw.get(k)) decode_bytes += static_cast<int64_t>(b.size());
  ASSERT_GT(decode_bytes, 0);
  EXPECT_FALSE(pw.keep_resident(f.decode, decode_bytes - 1));
  for (const auto& k : pw.keys()) EXPECT_TRUE(pw.releases(k)) << k;
  EXPECT_TRUE(pw.keep_resident(f.decode, decode_bytes));
  size_t released = 0;
  for (const auto& k : pw.keys()) {
    EXPECT_EQ(pw.releases(k), !decode_keys.count(k)) << k;
    released += pw.releases(k) ? 1 : 0;
  }
  EXPECT_GT(released, 0u) << "the prefill plan has layouts of its own";
  pw.release_after_use = false;
  for (const auto& k : pw.keys()) EXPECT_FALSE(pw.releases(k)) << k;
}

// The deploy path: packed key by key straight into the file, then mapped.
// Every buffer is a view of the mapping (no copy in memory) holding the bytes
// pack_weights makes in memory; editing one copies only that buffer.
TEST(PackedWeightsFile, StreamedFileIsMappedAndHoldsThePackedBytes) {
  Fixture f(PlanStyle::standard);
  const PackedWeights pw = pack_weights(f.plans(), f.config, f.weights);
  const fs::path file = temp_dir() / "streamed.safetensors";
  std::vector<size_t> done;
  write_packed_weights(file, f.plans(), f.config, f.weights, [&](size_t d, size_t) { done.push_back(d); });
  EXPECT_EQ(done.size(), pw.keys().size());
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
  PackedWeights back = PackedWeights::load(file);
  EXPECT_EQ(back.model, pw.model);
  EXPECT_EQ(back.spec, pw.spec);
  ASSERT_EQ(back.keys(), pw.keys());
  for (const auto& k : pw.keys()) EXPECT_EQ(back.get(k), pw.get(k)) << k;
  EXPECT_EQ(back.mapped_bytes(), back.bytes());
  EXPECT_EQ(pw.mapped_bytes(), 0);
  EXPECT_FALSE(back.release_after_use);  // far below kResidentAllowance
  // Pages given back fault in again with the same bytes.
  back.release_pages();
  for (const auto& k : pw.keys()) EXPECT_EQ(back.get(k), pw.get(k)) << k;
  // A planted edit (deploy --plant-bug) lands in a private copy of that buffer.
  const std::string key = pw.keys().front();
  PackedBuffer& edited = back.get_mut(key).begin()->second;
  edited.mutable_bytes()[0] ^= std::byte{0x01};
  EXPECT_FALSE(edited.mapped());
  EXPECT_NE(back.get(key), pw.get(key));
  EXPECT_EQ(PackedWeights::load(file).get(key), pw.get(key)) << "the edit reached the file";
  EXPECT_EQ(back.mapped_bytes(), back.bytes() - static_cast<int64_t>(edited.size()));
  fs::remove_all(file.parent_path());
}

TEST(PackedWeightsFile, ForeignAndCorruptedFilesAreRejected) {
  const fs::path dir = temp_dir();
  // A model checkpoint is a valid safetensors file, but not packed weights.
  const fs::path foreign = dir / "model.safetensors";
  model::write_safetensors(foreign, {{"x", Tensor::from_f32({2}, std::vector<float>{1, 2})}});
  try {
    PackedWeights::load(foreign);
    FAIL() << "a foreign file must throw";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(foreign.string()), std::string::npos) << e.what();
  }
  // Another format or a future version, even with model and spec names.
  for (const auto& [format, version] : {std::pair{"other-format", "1"},
                                        std::pair{"tessera-packed-weights", "2"}}) {
    const fs::path f = dir / "meta.safetensors";
    model::write_safetensors(f, {{"w:x@table/table", Tensor::from_f32({2}, std::vector<float>{1, 2}).to(DType::bf16)}},
                             {{"format", format}, {"version", version}, {"model", "tiny"},
                              {"spec", "xdna2"}});
    EXPECT_THROW(PackedWeights::load(f), SafetensorsError) << format << " v" << version;
  }
  // Right metadata, wrong tensor naming.
  const fs::path odd = dir / "odd.safetensors";
  model::write_safetensors(odd, {{"x", Tensor::from_f32({2}, std::vector<float>{1, 2})}},
                           {{"format", "tessera-packed-weights"}, {"version", "1"},
                            {"model", "tiny"}, {"spec", "xdna2"}});
  EXPECT_THROW(PackedWeights::load(odd), SafetensorsError);
  // A truncated file.
  Fixture f(PlanStyle::standard);
  const fs::path good = dir / "packed.safetensors";
  pack_weights(f.plans(), f.config, f.weights).save(good);
  const fs::path cut = dir / "cut.safetensors";
  fs::copy_file(good, cut);
  fs::resize_file(cut, fs::file_size(good) - 10);
  EXPECT_THROW(PackedWeights::load(cut), InputError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::compiler
