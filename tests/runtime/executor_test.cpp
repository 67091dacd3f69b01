#include "tessera/runtime/executor.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "host_ops.h"
#include "runtime_fixture.h"
#include "tessera/core/error.h"
#include "tessera/kernels/activation_layout.h"
#include "tessera/kernels/op_builder.h"
#include "tessera/oracle/rope.h"
#include "tessera/oracle/taps.h"

namespace tessera::runtime {
namespace {

using compiler::Plan;
using compiler::PlanStyle;
using compiler::ValueKind;
using compiler::ValueRef;
using testing::TinyModel;
using testing::host_inputs;
using testing::kU;


// Per layer, the K and V caches a prefill of `prompt` leaves (its values
// "L<i>.k_cache" / "L<i>.v_cache"), run on `exec`: the decode tests' caches.
struct Caches {
  std::vector<std::vector<float>> k, v;
};
Caches prefill_caches(Executor& exec, const TinyModel& m, const std::vector<int32_t>& prompt) {
  const auto P = static_cast<int64_t>(prompt.size());
  const ExecResult pre = exec.run(testing::lower_plan(m, P, 0, PlanStyle::standard), host_inputs(m, prompt, 0));
  Caches c;
  for (int l = 0; l < m.config.num_layers; ++l) {
    c.k.push_back(pre.values.at(ValueRef{ValueKind::activation, "k_cache", l, false}.str()));
    c.v.push_back(pre.values.at(ValueRef{ValueKind::activation, "v_cache", l, false}.str()));
  }
  return c;
}

// The deploy path reads weights where the packed file is mapped (no copy),
// and for a model too large to keep resident gives each step's pages back
// after it ran: neither changes a single value.
TEST(Executor, MappedWeightsWithPagesReleasedAgreeBitwiseWithPackedInMemory) {
  const TinyModel& m = testing::tiny("tiny");
  const auto tokens = testing::prompt_tokens(5, m.config.vocab_size, 3);
  const Plan prefill = testing::lower_plan(m, 5, 0);
  const auto file = std::filesystem::path(::testing::TempDir()) / ("mapped-" + std::to_string(::getpid()));
  compiler::write_packed_weights(file, {&prefill}, m.config, m.weights);
  compiler::PackedWeights mapped = compiler::PackedWeights::load(file);
  std::filesystem::remove(file);  // the mapping keeps the bytes
  ASSERT_EQ(mapped.mapped_bytes(), mapped.bytes());
  const ExecResult want = Executor(m.spec, *m.packed).run(prefill, host_inputs(m, tokens, 0));
  for (bool release : {false, true}) {
    mapped.release_after_use = release;
    const ExecResult got = Executor(m.spec, mapped).run(prefill, host_inputs(m, tokens, 0));
    ASSERT_EQ(got.values.size(), want.values.size());
    for (const auto& [name, values] : want.values)
      EXPECT_TRUE(values == got.values.at(name)) << name << " differs, release_after_use " << release;
  }
}

// A resident KV cache (kv-resident) changes where the cache lives and who
// appends to it, not what is computed: with re-layout priced out of reach the
// pass keeps it (NPU kv_append writing in place, the attention reading its
// blocks out of the row-major cache), the executor runs that plan, and every
// value, the caches included, equals the host-append plan's bit for bit.
TEST(Executor, ResidentKvCacheAgreesBitwiseWithTheHostAppend) {
  const TinyModel& m = testing::tiny("tiny");
  const int64_t P = 40;
  const auto tokens = testing::prompt_tokens(P, m.config.vocab_size, 3);
  Executor exec(m.spec, *m.packed);
  auto [k, v] = prefill_caches(exec, m, tokens);
  compiler::PlanOptions o;
  o.host.bytes_per_second = 1e6;
  const Plan resident = compiler::lower(m.config, 1, P, *m.cache, o);
  o.disabled = {"kv-resident"};
  const Plan host = compiler::lower(m.config, 1, P, *m.cache, o);
  int npu_appends = 0;
  for (const auto& s : resident.steps)
    for (const auto& l : s.launches) npu_appends += l.shape.op == "kv_append" && s.kind == compiler::StepKind::npu;
  ASSERT_EQ(npu_appends, 2 * m.config.num_layers);
  const ExecResult a = exec.run(host, host_inputs(m, {tokens[0]}, P, k, v));
  const ExecResult b = exec.run(resident, host_inputs(m, {tokens[0]}, P, k, v));
  ASSERT_EQ(a.values.size(), b.values.size());
  for (const auto& [name, values] : a.values) {
    ASSERT_TRUE(b.values.count(name)) << name;
    EXPECT_TRUE(values == b.values.at(name)) << name << " differs with the resident cache";
  }
}

// The executor keeps a resident cache's bytes from one run to the next
// instead of zero-filling its R rows per token; every run must still see the
// bytes a fresh buffer would. Runs at P = 40, then a new prompt's shorter
// P = 8 (rows 9..40 of the kept image are stale) and P = 9 give the values a
// fresh executor gives, and leave the image a fresh executor leaves. The
// kept executor's later runs pack each kv_append's inputs in order at once
// (its cache pack fills its new rows' padding, so views collide): the fresh
// one views, collides and packs again, and both give the same bits.
TEST(Executor, KeptResidentCacheImageEqualsAFreshOne) {
  const TinyModel& m = testing::tiny("tiny");
  const auto tokens = testing::prompt_tokens(40, m.config.vocab_size, 5);
  Executor kept(m.spec, *m.packed);
  auto [k, v] = prefill_caches(kept, m, tokens);
  compiler::PlanOptions o;
  o.host.bytes_per_second = 1e6;  // re-layout priced out of reach: kv-resident kept
  for (const int64_t P : {40, 8, 9}) {
    const Plan plan = compiler::lower(m.config, 1, P, *m.cache, o);
    Executor fresh(m.spec, *m.packed);
    const ExecResult a = kept.run(plan, host_inputs(m, {tokens[3]}, P, k, v));
    const ExecResult b = fresh.run(plan, host_inputs(m, {tokens[3]}, P, k, v));
    for (const auto& [name, values] : b.values)
      EXPECT_TRUE(values == a.values.at(name)) << name << " differs at P=" << P;
    ASSERT_EQ(kept.resident_images().size(), 2u * m.config.num_layers) << "P=" << P;
    for (const auto& [name, img] : kept.resident_images())
      EXPECT_TRUE(kept.packs_in_order().count(name)) << name << ": its packs did not collide at P=" << P;
    for (const auto& [name, img] : fresh.resident_images()) {
      ASSERT_FALSE(img.bytes.empty()) << name << ": the image did not come back after the run";
      EXPECT_TRUE(img.bytes == kept.resident_images().at(name).bytes) << name << " image differs at P=" << P;
    }
  }
}

// An append-only caller (a Session) lets a resident cache keep the rows its
// image holds: consecutive decode steps, each appending the row the last
// one wrote, give a fresh executor's values and images. The rows in place
// are not packed again (a row of the image corrupted behind the executor's
// back stays), unless the row the caller appended differs from the image's
// (then every row is packed, and the corruption is gone).
TEST(Executor, AppendOnlyCallerKeepsTheImageRows) {
  const TinyModel& m = testing::tiny("tiny");
  const int64_t P0 = 40, kvd = m.config.kv_dim();
  const auto tokens = testing::prompt_tokens(P0 + 4, m.config.vocab_size, 5);
  Executor kept(m.spec, *m.packed);
  kept.set_append_only(true);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + P0);
  auto [k, v] = prefill_caches(kept, m, prompt);
  compiler::PlanOptions o;
  o.host.bytes_per_second = 1e6;  // re-layout priced out of reach: kv-resident kept
  auto step = [&](int64_t P, Executor& exec) {
    return exec.run(compiler::lower(m.config, 1, P, *m.cache, o), host_inputs(m, {tokens[P]}, P, k, v));
  };
  auto append = [&](const ExecResult& r) {
    for (int l = 0; l < m.config.num_layers; ++l)
      for (auto* c : {&k, &v}) {
        const auto& all = r.values.at(ValueRef{ValueKind::activation, c == &k ? "k_cache" : "v_cache", l, false}.str());
        auto& mine = (*c)[static_cast<size_t>(l)];
        mine.insert(mine.end(), all.end() - kvd, all.end());
      }
  };
  for (int64_t P = P0; P < P0 + 2; ++P) {
    Executor fresh(m.spec, *m.packed);
    const ExecResult a = step(P, kept), b = step(P, fresh);
    for (const auto& [name, values] : b.values) EXPECT_TRUE(values == a.values.at(name)) << name << " at P=" << P;
    for (const auto& [name, img] : fresh.resident_images())
      EXPECT_TRUE(img.bytes == kept.resident_images().at(name).bytes) << name << " image at P=" << P;
    append(a);
  }
  const std::string name = ValueRef{ValueKind::activation, "k_cache", 0, false}.str();
  auto& image = kept.resident_images().at(name).bytes;
  ASSERT_FALSE(image.empty());
  const std::vector<std::byte> before = image;
  image[0] ^= std::byte{0x40};  // row 0, in place: not packed again
  append(step(P0 + 2, kept));
  EXPECT_NE(kept.resident_images().at(name).bytes[0], before[0]) << "row 0 was packed again";
  k[0][static_cast<size_t>((P0 + 2) * kvd)] += 1.0f;  // the caller's copy of the row just appended differs
  Executor fresh(m.spec, *m.packed);
  const ExecResult a = step(P0 + 3, kept), b = step(P0 + 3, fresh);
  for (const auto& [n, values] : b.values) EXPECT_TRUE(values == a.values.at(n)) << n << " after a differing row";
  for (const auto& [n, img] : fresh.resident_images())
    EXPECT_TRUE(img.bytes == kept.resident_images().at(n).bytes) << n << " image after a differing row";
}

// keep_rows: a value comes back as the asked rows only, the rows the whole
// value has, whether its producer unpacks them alone (the NPU kv_append of a
// resident cache) or the executor slices them (the host append); the other
// values do not change.
TEST(Executor, KeptRowsAreThoseOfTheWholeValue) {
  const TinyModel& m = testing::tiny("tiny");
  const int64_t P = 40, kvd = m.config.kv_dim();
  const auto tokens = testing::prompt_tokens(P, m.config.vocab_size, 3);
  Executor exec(m.spec, *m.packed);
  auto [k, v] = prefill_caches(exec, m, tokens);
  std::set<std::string> caches;
  for (int l = 0; l < m.config.num_layers; ++l)
    for (const char* c : {"k_cache", "v_cache"}) caches.insert(ValueRef{ValueKind::activation, c, l, false}.str());
  compiler::PlanOptions o;
  for (const double host_rate : {1e6, 1e15}) {  // resident kept / rejected
    o.host.bytes_per_second = host_rate;
    const Plan plan = compiler::lower(m.config, 1, P, *m.cache, o);
    std::set<std::string> keep = caches;
    keep.insert("logits");
    const ExecResult whole = exec.run(plan, host_inputs(m, {tokens[0]}, P, k, v), &keep);
    for (const int64_t first : {P, int64_t{0}}) {
      std::map<std::string, KeepRows> rows;
      for (const std::string& name : caches) rows[name] = KeepRows{first, 1, kvd};
      const std::set<std::string> logits = {"logits"};
      const ExecResult got = exec.run(plan, host_inputs(m, {tokens[0]}, P, k, v), &logits, {}, -1, &rows);
      EXPECT_TRUE(got.values.at("logits") == whole.values.at("logits"));
      for (const std::string& name : caches) {
        const std::vector<float>& all = whole.values.at(name);
        const std::vector<float> want(all.begin() + first * kvd, all.begin() + (first + 1) * kvd);
        EXPECT_TRUE(got.values.at(name) == want) << name << " row " << first << ", host rate " << host_rate;
      }
    }
  }
}

// The host ops against kernels::run_op on the same inputs, on edge cases the
// model runs may not hit: ids 0 and V-1 and repeats, a cache whose values are
// not bf16-exact (rounding), an append at the end of the cache, argmax ties
// (first index wins), several rows, values that round to a tie.
TEST(HostOps, EqualNpuOpsBitwise) {
  const auto spec = npu::DeviceSpec::preset("xdna2");
  auto npu_run = [&](const kernels::OpShape& s, const std::vector<std::vector<float>>& in) {
    return kernels::run_op(kernels::op_builder(s.op).build(s, spec), in, spec).outputs.at(0);
  };
  auto ramp = [](size_t n, float scale) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
    return v;
  };
  {
    const kernels::OpShape s{"embedding", {{"M", 7}, {"V", 40}, {"H", 34}}, {}};
    const std::vector<float> ids = {0, 39, 5, 5, 17, 0, 39};
    const auto table = ramp(40 * 34, 3.1f);
    const auto built = kernels::op_builder("embedding").build(s, spec);
    npu::HostMemory host;
    built.pack(1, table, host);
    EXPECT_TRUE(host_embedding(s, ids, host.at("table")) == npu_run(s, {ids, table}));
    EXPECT_THROW(host_embedding(s, std::vector<float>{0, 1, 2, 3, 4, 5, 40}, host.at("table")),
                 InputError);
  }
  for (int64_t pos : {0, 3, 9}) {
    const kernels::OpShape s{"kv_append", {{"M", 3}, {"T", 12}, {"pos", pos}, {"kv_dim", 64}}, {}};
    const auto rows = ramp(3 * 64, 1.7f), cache = ramp(12 * 64, 0.9f);
    EXPECT_TRUE(host_kv_append(s, rows, cache) == npu_run(s, {rows, cache})) << "pos " << pos;
  }
  for (int64_t V : {1, 7, 300, 1000}) {
    const kernels::OpShape s{"argmax", {{"M", 3}, {"V", V}}, {}};
    auto logits = ramp(static_cast<size_t>(3 * V), 2.0f);
    logits[static_cast<size_t>(V - 1)] = 5.0f;            // row 0: max at the end
    logits[static_cast<size_t>(V + V / 2)] = 5.0f;        // row 1: tie with ...
    logits[static_cast<size_t>(2 * V - 1)] = 5.0f;        // ... a later index
    logits[static_cast<size_t>(2 * V)] = 4.0001f;         // row 2: rounds to 4 ...
    logits[static_cast<size_t>(3 * V - 1)] = 4.0f;        // ... as this one does
    EXPECT_TRUE(host_argmax(s, logits) == npu_run(s, {logits})) << "V " << V;
  }
}

TEST(Executor, KeepsOnlyRequestedValuesAndTakesTheRequestedLastRow) {
  const TinyModel& m = testing::tiny("tiny");
  const auto tokens = testing::prompt_tokens(5, m.config.vocab_size);
  const Plan p5 = testing::lower_plan(m, 5, 0);
  Executor exec(m.spec, *m.packed);
  const std::set<std::string> keep = {"L0.q", "L1.h_out", "logits"};
  const ExecResult r5 = exec.run(p5, host_inputs(m, tokens, 0), &keep, {}, 2);
  std::set<std::string> got;
  for (const auto& [name, v] : r5.values) got.insert(name);
  EXPECT_EQ(got, keep);
  // Row 2 of a causal 5-token prefill is the last row of a 3-token prefill.
  const Plan p3 = testing::lower_plan(m, 3, 0);
  const std::vector<int32_t> first3(tokens.begin(), tokens.begin() + 3);
  const ExecResult r3 = exec.run(p3, host_inputs(m, first3, 0));
  const auto d = testing::diff(r3.values.at("logits"), r5.values.at("logits"));
  // Same math on the same rows, only the GEMM row blocking differs: a few bf16 ulps at most.
  EXPECT_LT(d.max_rel, 4 * kU);
  EXPECT_GT(d.cosine, 0.9999);
  size_t calls = 0;
  exec.run(p3, host_inputs(m, first3, 0), &keep, [&](size_t done, size_t total) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(total, p3.steps.size());
  });
  EXPECT_EQ(calls, p3.steps.size());
  EXPECT_THROW(exec.run(p3, host_inputs(m, first3, 0), &keep, {}, 3), UsageError);
}

TEST(Executor, MissingInputAndLayoutAreNamedAndWeightsSurviveErrors) {
  const TinyModel& m = testing::tiny("tiny");
  const auto tokens = testing::prompt_tokens(5, m.config.vocab_size);
  const Plan plan = testing::lower_plan(m, 5, 0);
  Executor exec(m.spec, *m.packed);
  Values in = host_inputs(m, tokens, 0);
  in.erase("host:rope_sin");
  try {
    exec.run(plan, in);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("host:rope_sin"), std::string::npos) << e.what();
  }
  // An error inside an NPU step that reads its weights in place (per-op
  // embedding: the id is checked after the table is viewed) must leave the
  // packed weights as they were.
  const Plan per_op = testing::lower_plan(m, 5, 0, PlanStyle::per_op);
  const std::string table = per_op.steps[0].front().weight_layouts.at(1);
  ASSERT_EQ(per_op.steps[0].front().shape.op, "embedding");
  const auto before = m.packed->get(table);
  Values bad = host_inputs(m, tokens, 0);
  bad["host:token_ids"][3] = static_cast<float>(m.config.vocab_size);
  EXPECT_THROW(exec.run(per_op, bad), InputError);
  EXPECT_TRUE(m.packed->get(table) == before) << table << " changed";
  compiler::PackedWeights empty;
  Executor none(m.spec, empty);
  try {
    none.run(plan, host_inputs(m, tokens, 0));
    FAIL() << "no error";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("w:embed_tokens@"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::runtime
