#pragma once
// The preset sweep the attention builder tests share: every (heads, kv_heads,
// head_dim) of the ten presets, prefill at each S (P = 0) and decode over each
// T, on both device presets: builds (the builder validates) and has a timing
// estimate.
#include <cstdint>
#include <initializer_list>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/kernels/op_builder.h"
#include "tessera/model/config.h"
#include "tessera/npu/timing.h"

namespace tessera::kernels::test {

inline void for_each_preset_shape(std::initializer_list<int64_t> prefill_S,
                                  std::initializer_list<int64_t> decode_T) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> heads;
  for (const auto& name : model::preset_names()) {
    model::ModelConfig m = model::preset(name);
    heads.insert({m.num_heads, m.num_kv_heads, m.head_dim});
  }
  for (const auto& dev : {"xdna2", "xdna1"}) {
    const auto spec = npu::DeviceSpec::preset(dev);
    for (auto [h, kv, d] : heads) {
      for (int64_t S : prefill_S) {
        SCOPED_TRACE(fmt::format("{} prefill S={} heads={} kv={} d={}", dev, S, h, kv, d));
        OpShape s{"attention_prefill",
                  {{"S", S}, {"P", 0}, {"heads", h}, {"kv_heads", kv}, {"head_dim", d}}, {}};
        BuiltOp b = op_builder(s.op).build(s, spec);
        EXPECT_GT(npu::estimate_time(b.design, spec).total_seconds, 0);
      }
      for (int64_t T : decode_T) {
        SCOPED_TRACE(fmt::format("{} decode T={} heads={} kv={} d={}", dev, T, h, kv, d));
        OpShape s{"attention_decode", {{"T", T}, {"heads", h}, {"kv_heads", kv}, {"head_dim", d}}, {}};
        BuiltOp b = op_builder(s.op).build(s, spec);
        EXPECT_GT(npu::estimate_time(b.design, spec).total_seconds, 0);
      }
    }
  }
}

}  // namespace tessera::kernels::test
