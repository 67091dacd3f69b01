#include "tessera/pipeline/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tessera/core/error.h"
#include "tessera/oracle/ops.h"
#include "tessera/oracle/rope.h"

namespace tessera::pipeline {

using kernels::OpShape;

namespace {

struct Sizes {
  std::vector<int64_t> in;
  int64_t out = 0;
};

Sizes sizes(const OpShape& s) {
  const std::string& op = s.op;
  if (op == "linear") {
    const int64_t M = s.dim("M"), K = s.dim("K"), N = s.dim("N");
    return {{M * K, N * K}, M * N};
  }
  if (op == "rmsnorm") return {{s.dim("M") * s.dim("H"), s.dim("H")}, s.dim("M") * s.dim("H")};
  if (op == "head_rmsnorm") {
    const int64_t n = s.dim("M") * s.dim("heads") * s.dim("head_dim");
    return {{n, s.dim("head_dim")}, n};
  }
  if (op == "rope") {
    const int64_t M = s.dim("M"), n = M * s.dim("heads") * s.dim("head_dim");
    return {{n, M * s.dim("head_dim") / 2, M * s.dim("head_dim") / 2}, n};
  }
  if (op == "bias_add") return {{s.dim("M") * s.dim("N"), s.dim("N")}, s.dim("M") * s.dim("N")};
  if (op == "silu_mul" || op == "residual_add") {
    const int64_t n = s.dim("M") * s.dim("N");
    return {{n, n}, n};
  }
  if (op == "attention_prefill") {
    const int64_t S = s.dim("S"), T = s.dim("P") + S, hd = s.dim("head_dim");
    const int64_t q = S * s.dim("heads") * hd, kv = T * s.dim("kv_heads") * hd;
    return {{q, kv, kv}, q};
  }
  if (op == "attention_decode") {
    const int64_t hd = s.dim("head_dim"), kv = s.dim("T") * s.dim("kv_heads") * hd;
    return {{s.dim("heads") * hd, kv, kv}, s.dim("heads") * hd};
  }
  if (op == "kv_append") {
    const int64_t d = s.dim("kv_dim");
    return {{s.dim("M") * d, s.dim("T") * d}, s.dim("T") * d};
  }
  if (op == "embedding") return {{s.dim("M"), s.dim("V") * s.dim("H")}, s.dim("M") * s.dim("H")};
  if (op == "argmax") return {{s.dim("M") * s.dim("V")}, s.dim("M")};
  throw_error<UsageError>("no reference for op '{}'", op);
}

// The oracle's attention uses 1/sqrt(head_dim); another scale is folded into q.
std::vector<float> attention(const oracle::AttentionShape& a, double scale,
                             std::span<const float> q, const float* k, const float* v) {
  std::vector<float> out(q.size());
  const double fold = scale * std::sqrt(static_cast<double>(a.head_dim));
  if (std::fabs(fold - 1.0) < 1e-12) {
    oracle::causal_attention(a, q.data(), k, v, out.data());
  } else {
    std::vector<float> qs(q.begin(), q.end());
    for (float& x : qs) x = static_cast<float>(x * fold);
    oracle::causal_attention(a, qs.data(), k, v, out.data());
  }
  return out;
}

std::vector<float> rope(const OpShape& s, std::span<const float> x, const float* cos,
                        const float* sin) {
  const int64_t M = s.dim("M"), heads = s.dim("heads"), hd = s.dim("head_dim");
  std::vector<float> y(x.begin(), x.end());
  for (int64_t m = 0; m < M; ++m)
    oracle::apply_rope(y.data() + m * heads * hd, heads, hd, cos + m * hd / 2, sin + m * hd / 2);
  return y;
}

std::vector<float> compute(const OpShape& s, const std::vector<std::span<const float>>& in) {
  const std::string& op = s.op;
  const Sizes z = sizes(s);
  std::vector<float> y(static_cast<size_t>(z.out));
  if (op == "linear") {
    oracle::linear(in[0].data(), s.dim("M"), s.dim("K"), in[1].data(), s.dim("N"), nullptr,
                   y.data());
  } else if (op == "rmsnorm") {
    oracle::rms_norm(in[0].data(), s.dim("M"), s.dim("H"), in[1].data(), s.attr("eps", 1e-6),
                     y.data());
  } else if (op == "head_rmsnorm") {
    oracle::rms_norm(in[0].data(), s.dim("M") * s.dim("heads"), s.dim("head_dim"), in[1].data(),
                     s.attr("eps", 1e-6), y.data());
  } else if (op == "rope") {
    y = rope(s, in[0], in[1].data(), in[2].data());
  } else if (op == "bias_add") {
    const size_t N = static_cast<size_t>(s.dim("N"));
    for (size_t i = 0; i < y.size(); ++i) y[i] = in[0][i] + in[1][i % N];
  } else if (op == "residual_add") {
    for (size_t i = 0; i < y.size(); ++i) y[i] = in[0][i] + in[1][i];
  } else if (op == "silu_mul") {
    oracle::swiglu(in[0].data(), in[1].data(), static_cast<int64_t>(y.size()), y.data());
  } else if (op == "attention_prefill" || op == "attention_decode") {
    const bool prefill = op == "attention_prefill";
    const int64_t rows = prefill ? s.dim("S") : 1;
    const int64_t first = prefill ? s.dim("P") : s.dim("T") - 1;
    const oracle::AttentionShape a{rows, first, s.dim("heads"), s.dim("kv_heads"),
                                   s.dim("head_dim")};
    const double scale = s.attr("scale", 1.0 / std::sqrt(static_cast<double>(a.head_dim)));
    y = attention(a, scale, in[0], in[1].data(), in[2].data());
  } else if (op == "kv_append") {
    const int64_t d = s.dim("kv_dim"), pos = s.dim("pos"), M = s.dim("M");
    if (pos < 0 || pos + M > s.dim("T"))
      throw_error<UsageError>("{}: rows {}..{} are outside the cache", s.key(), pos, pos + M - 1);
    std::copy(in[1].begin(), in[1].end(), y.begin());
    std::copy(in[0].begin(), in[0].end(), y.begin() + pos * d);
  } else if (op == "embedding") {
    const int64_t H = s.dim("H"), V = s.dim("V");
    for (int64_t m = 0; m < s.dim("M"); ++m) {
      const auto id = static_cast<int64_t>(in[0][static_cast<size_t>(m)]);
      if (id < 0 || id >= V) throw_error<UsageError>("{}: id {} outside [0, {})", s.key(), id, V);
      std::memcpy(y.data() + m * H, in[1].data() + id * H, static_cast<size_t>(H) * sizeof(float));
    }
  } else if (op == "argmax") {
    const size_t V = static_cast<size_t>(s.dim("V"));
    for (size_t m = 0; m < y.size(); ++m) {
      auto row = in[0].subspan(m * V, V);
      y[m] = static_cast<float>(std::max_element(row.begin(), row.end()) - row.begin());
    }
  }
  return y;
}

}  // namespace

std::vector<int64_t> reference_input_sizes(const OpShape& shape) { return sizes(shape).in; }
int64_t reference_output_size(const OpShape& shape) { return sizes(shape).out; }

std::vector<float> reference_op(const OpShape& shape,
                                const std::vector<std::span<const float>>& inputs) {
  const Sizes z = sizes(shape);
  if (inputs.size() != z.in.size())
    throw_error<UsageError>("{}: {} inputs given, the op takes {}", shape.key(), inputs.size(),
                            z.in.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (static_cast<int64_t>(inputs[i].size()) != z.in[i])
      throw_error<UsageError>("{}: input {} has {} values, the op needs {}", shape.key(), i,
                              inputs[i].size(), z.in[i]);
  return compute(shape, inputs);
}

}  // namespace tessera::pipeline
