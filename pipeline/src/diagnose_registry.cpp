// The diagnosers, one registry entry each (diagnose.h). A numeric diagnoser
// builds the op's output under its hypothesis from the very inputs the NPU
// read - by editing those inputs or the op's attributes and calling the oracle
// op (reference_ops.h), or by moving values as a wrong address would - and
// hands the variants to judge(). Adding a diagnoser is one function and one
// row in registry() below.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "diagnose_internal.h"
#include "tessera/core/error.h"
#include "tessera/core/mutants.h"
#include "tessera/kernels/tile_search.h"
#include "tessera/npu/timing.h"
#include "tessera/oracle/rope.h"

namespace tessera::pipeline::diag {

namespace {

using In = std::vector<std::vector<float>>;

Outcome untestable(std::string why) {
  Outcome o;
  o.tried.push_back(std::move(why));
  return o;
}

// The weight [N, K] handed over as its transpose [K, N], read as [N, K].
Outcome transposed_weight(const OpCase& c) {
  const int64_t N = c.shape.dim("N"), K = c.shape.dim("K");
  In in = c.inputs;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      in[1][static_cast<size_t>(k * N + n)] = c.inputs[1][static_cast<size_t>(n * K + k)];
  return judge(c, {{"the weight read transposed", reference(c.shape, in)}});
}

// HF rotates pairs (i, i + d/2); a kernel pairing (2i, 2i + 1) equals the
// oracle op on x de-interleaved, its output re-interleaved.
Outcome rope_pairing(const OpCase& c) {
  const auto d = static_cast<size_t>(c.shape.dim("head_dim"));
  In in = c.inputs;
  const std::vector<float>& x = c.inputs[0];
  for (size_t h = 0; h + d <= x.size(); h += d)
    for (size_t j = 0; j < d / 2; ++j) {
      in[0][h + j] = x[h + 2 * j];
      in[0][h + j + d / 2] = x[h + 2 * j + 1];
    }
  const std::vector<float> y = reference(c.shape, in);
  std::vector<float> out(y.size());
  for (size_t h = 0; h + d <= y.size(); h += d)
    for (size_t j = 0; j < d / 2; ++j) {
      out[h + 2 * j] = y[h + j];
      out[h + 2 * j + 1] = y[h + j + d / 2];
    }
  return judge(c, {{"pairs (2i, 2i+1) rotated instead of (i, i+d/2)", std::move(out)}});
}

// The RoPE table of positions P + k .. instead of P ..
Outcome rope_offset(const OpCase& c) {
  if (c.config == nullptr) return {};
  std::vector<Variant> vs;
  for (int64_t k : {1, -1, 2, -2, 3, -3, 4, -4}) {
    if (c.past + k < 0) continue;
    const oracle::RopeTable t = oracle::rope_table(*c.config, c.past + k, c.shape.dim("M"));
    if (t.cos.size() != c.inputs[1].size()) continue;
    In in = c.inputs;
    in[1] = t.cos;
    in[2] = t.sin;
    vs.push_back({fmt::format("positions off by {:+d}", k), reference(c.shape, in)});
  }
  return judge(c, vs);
}

// The caller's RoPE table at bf16 precision (f32 is what the design takes):
// rounded to nearest even, or truncated (a one-sided bias on every rotation).
Outcome rope_table_precision(const OpCase& c) {
  std::vector<Variant> vs;
  for (const bool truncate : {false, true}) {
    In in = c.inputs;
    for (size_t t = 1; t <= 2; ++t)
      for (float& x : in[t]) x = truncate ? truncate_bf16(x) : round_bf16(x);
    vs.push_back({truncate ? "cos / sin truncated to bf16" : "cos / sin rounded to bf16", reference(c.shape, in)});
  }
  return judge(c, vs);
}

Outcome bias(const OpCase& c) {
  std::vector<Variant> vs;
  for (const auto& [label, f] : {std::pair{"the bias missing", 0.0f}, std::pair{"the bias added twice", 2.0f}}) {
    In in = c.inputs;
    for (float& b : in[1]) b *= f;
    vs.push_back({label, reference(c.shape, in)});
  }
  return judge(c, vs);
}

// HF maps query head h to KV head h / (H / KV); the other common mapping is
// h % KV. Reproduced by moving query head h into the slot the correct mapping
// sends to KV head h % KV, and the output back.
Outcome gqa_mapping(const OpCase& c) {
  const int64_t H = c.shape.dim("heads"), KV = c.shape.dim("kv_heads"), D = c.shape.dim("head_dim");
  if (KV <= 1 || KV == H) return {};
  const int64_t G = H / KV;
  const auto slot = [&](int64_t h) { return (h % KV) * G + h / KV; };
  In in = c.inputs;
  const size_t rows = c.inputs[0].size() / static_cast<size_t>(H * D);
  const auto at = [&](size_t r, int64_t h) { return r * static_cast<size_t>(H * D) + static_cast<size_t>(h * D); };
  for (size_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h)
      std::copy_n(c.inputs[0].begin() + static_cast<std::ptrdiff_t>(at(r, h)), D,
                  in[0].begin() + static_cast<std::ptrdiff_t>(at(r, slot(h))));
  const std::vector<float> y = reference(c.shape, in);
  std::vector<float> out(y.size());
  for (size_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h)
      std::copy_n(y.begin() + static_cast<std::ptrdiff_t>(at(r, slot(h))), D,
                  out.begin() + static_cast<std::ptrdiff_t>(at(r, h)));
  return judge(c, {{"query head h reading KV head h % kv_heads instead of h / (heads / kv_heads)", std::move(out)}});
}

// Without max subtraction e^score overflows fp32 (and bf16: same exponent
// range) once score * scale > ln(FLT_MAX) ~ 88.72, and the row becomes
// inf / inf = NaN; below that the result is the correct op's.
Outcome softmax_overflow(const OpCase& c) {
  const bool prefill = c.shape.op == "attention_prefill";
  const int64_t rows = prefill ? c.shape.dim("S") : 1, first = prefill ? c.shape.dim("P") : c.shape.dim("T") - 1;
  const int64_t H = c.shape.dim("heads"), KV = c.shape.dim("kv_heads"), D = c.shape.dim("head_dim");
  const double scale = c.shape.attr("scale", 1.0 / std::sqrt(static_cast<double>(D)));
  const double limit = std::log(static_cast<double>(std::numeric_limits<float>::max()));
  std::vector<float> out = reference(c.shape, c.inputs);
  int64_t overflowing = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t h = 0; h < H; ++h) {
      const float* q = c.inputs[0].data() + (i * H + h) * D;
      bool over = false;
      for (int64_t t = 0; t <= first + i && !over; ++t) {
        const float* k = c.inputs[1].data() + (t * KV + h / (H / KV)) * D;
        double dot = 0;
        for (int64_t e = 0; e < D; ++e) dot += static_cast<double>(q[e]) * k[e];
        over = dot * scale > limit;
      }
      if (!over) continue;
      ++overflowing;
      std::fill_n(out.begin() + (i * H + h) * D, D, std::numeric_limits<float>::quiet_NaN());
    }
  if (overflowing == 0) return untestable("no score reaches the fp32 exp overflow: cannot reproduce");
  return judge(c, {{fmt::format("e^score without max subtraction ({} (row, head) pairs overflow)", overflowing),
                    std::move(out)}});
}

Outcome norm(const OpCase& c) {
  std::vector<Variant> vs;
  for (const auto& [label, f] : {std::pair{"epsilon x100", 100.0}, std::pair{"epsilon x0.01", 0.01}}) {
    kernels::OpShape s = c.shape;
    s.attrs["eps"] = c.shape.attr("eps", 1e-6) * f;
    vs.push_back({label, reference(s, c.inputs)});
  }
  In ones = c.inputs;
  std::fill(ones[1].begin(), ones[1].end(), 1.0f);
  vs.push_back({"the norm weight missing (all 1)", reference(c.shape, ones)});
  In plus = c.inputs;
  for (float& w : plus[1]) w += 1.0f;
  vs.push_back({"the norm weight applied as 1 + w", reference(c.shape, plus)});
  return judge(c, vs);
}

// The new rows copied to pos + k instead of pos (rows outside the cache lost).
Outcome kv_position(const OpCase& c) {
  const int64_t d = c.shape.dim("kv_dim"), M = c.shape.dim("M"), T = c.shape.dim("T"), pos = c.shape.dim("pos");
  std::vector<Variant> vs;
  for (int64_t k : {-1, 1, -2, 2}) {
    std::vector<float> y = c.inputs[1];
    for (int64_t r = 0; r < M; ++r) {
      const int64_t dst = pos + k + r;
      if (dst < 0 || dst >= T) continue;
      std::copy_n(c.inputs[0].begin() + r * d, d, y.begin() + dst * d);
    }
    vs.push_back({fmt::format("rows written at pos {:+d}", k), std::move(y)});
  }
  return judge(c, vs);
}

// The cache rows before pos (written by earlier calls) fed to the call wrong:
// the first such row the NPU's output disagrees on holding its neighbour's
// values (a caller that kept a stale row) or zeros (a dropped row). The rows
// the call writes are kv_position's.
Outcome kv_cache_rows(const OpCase& c) {
  const int64_t d = c.shape.dim("kv_dim"), T = c.shape.dim("T"), pos = c.shape.dim("pos");
  const std::vector<float> y = reference(c.shape, c.inputs);
  int64_t bad = -1;
  for (int64_t r = 0; r < pos && r < T && bad < 0; ++r)
    for (int64_t e = 0; e < d; ++e)
      if (y[static_cast<size_t>(r * d + e)] != c.npu[static_cast<size_t>(r * d + e)]) {
        bad = r;
        break;
      }
  if (bad < 0) return untestable("every cache row before pos equals the row fed to the call");
  std::vector<Variant> vs;
  for (int64_t k : {-1, 1}) {
    if (bad + k < 0 || bad + k >= T) continue;
    std::vector<float> v = y;
    std::copy_n(y.begin() + (bad + k) * d, d, v.begin() + bad * d);
    vs.push_back({fmt::format("cache row {} (written by an earlier call) fed back holding row {}", bad, bad + k), std::move(v)});
  }
  std::vector<float> z = y;
  std::fill_n(z.begin() + bad * d, d, 0.0f);
  vs.push_back({fmt::format("cache row {} (written by an earlier call) fed back as zeros", bad), std::move(z)});
  return judge(c, vs);
}

// An input cut as one row of a longer value (OpCase::row_view_*) taken at
// another row: a caller whose "last real token" of a bucketed prefill is off.
Outcome row_view_offset(const OpCase& c) {
  if (c.row_view_input < 0 || c.row_view_source.empty())
    return untestable("no input is one row of a longer value");
  const auto i = static_cast<size_t>(c.row_view_input);
  const size_t width = c.inputs.at(i).size();
  const auto rows = static_cast<int64_t>(c.row_view_source.size() / width);
  std::vector<Variant> vs;
  for (int64_t k : {-1, 1, -2, 2}) {
    const int64_t r = c.row_view_row + k;
    if (r < 0 || r >= rows) continue;
    In in = c.inputs;
    in[i].assign(c.row_view_source.begin() + r * static_cast<std::ptrdiff_t>(width),
                 c.row_view_source.begin() + (r + 1) * static_cast<std::ptrdiff_t>(width));
    vs.push_back({fmt::format("input {} taken at row {} instead of {} (off by {:+d})", i, r, c.row_view_row, k),
                  reference(c.shape, in)});
  }
  if (vs.empty()) return untestable("the value has no other row");
  return judge(c, vs);
}

// The executor bound another weight of the layer (same size) to the op.
Outcome wrong_weight(const OpCase& c) {
  std::vector<Variant> vs;
  for (size_t i = 0; i < c.other_weights.size() && i < c.inputs.size(); ++i)
    for (const auto& [name, w] : c.other_weights[i]) {
      In in = c.inputs;
      in[i] = w;
      vs.push_back({fmt::format("input {} bound to {}", i, name), reference(c.shape, in)});
    }
  if (vs.empty()) return untestable("no other weight of the same size to try");
  return judge(c, vs);
}

// [R, A, B] <-> [A, R, B] as flat row-major (B = 1: a plain transpose).
std::vector<float> swap_outer(const std::vector<float>& v, size_t R, size_t A, size_t B) {
  std::vector<float> out(v.size());
  for (size_t r = 0; r < R; ++r)
    for (size_t a = 0; a < A; ++a)
      std::copy_n(v.begin() + static_cast<std::ptrdiff_t>((r * A + a) * B), B,
                  out.begin() + static_cast<std::ptrdiff_t>((a * R + r) * B));
  return out;
}

// The layouts one dispatch may write and the next read as the other: token
// major [rows, width] vs its transpose, and [rows, heads, head_dim] vs head
// major [heads, rows, head_dim].
std::vector<std::pair<std::string, std::vector<float>>> relayouts(const OpCase& c, const std::vector<float>& v) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  const auto R = static_cast<size_t>(c.rows);
  if (R < 2 || v.size() % R != 0) return out;
  const size_t W = v.size() / R;
  out.push_back({"[tokens, width] read as [width, tokens]", swap_outer(v, R, W, 1)});
  out.push_back({"[width, tokens] read as [tokens, width]", swap_outer(v, W, R, 1)});
  if (c.shape.dims.count("head_dim")) {
    const auto D = static_cast<size_t>(c.shape.dim("head_dim"));
    if (W % D == 0 && W / D > 1) {
      out.push_back({"[tokens, heads, head_dim] read as [heads, tokens, head_dim]", swap_outer(v, R, W / D, D)});
      out.push_back({"[heads, tokens, head_dim] read as [tokens, heads, head_dim]", swap_outer(v, W / D, R, D)});
    }
  }
  return out;
}

Outcome layout_mismatch(const OpCase& c) {
  if (c.npu.empty()) return {};
  std::vector<Variant> vs;
  for (auto& [label, y] : relayouts(c, reference(c.shape, c.inputs)))
    vs.push_back({"its output " + label + " by the next dispatch", std::move(y)});
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (i >= c.activation.size() || !c.activation[i]) continue;
    for (auto& [label, x] : relayouts(c, c.inputs[i])) {
      In in = c.inputs;
      in[i] = std::move(x);
      vs.push_back({fmt::format("input {} {}", i, label), reference(c.shape, in)});
    }
  }
  return judge(c, vs);
}

// A LimitError from building the op: the hypothesis "these tiles do not fit,
// others would" is tested by the tile search building and validating the
// builder's candidates on the same spec.
Outcome device_limit(const OpCase& c) {
  if (!c.error) return {};
  std::string what;
  try {
    std::rethrow_exception(c.error);
  } catch (const LimitError& e) {
    what = e.what();
  } catch (const std::exception&) {
    return untestable("the op's error is not a device limit");
  }
  Outcome o;
  o.reproduced = true;
  try {
    const kernels::TileChoice t = kernels::search_tiles(c.shape, c.spec);
    o.detail = fmt::format("tiles that fit: {} (predicted {:.1f} us by the timing model, {}-bound)",
                           kernels::tiles_text(t.best.tiles), t.best.seconds * 1e6, t.best.bound);
    if (t.runner_up.seconds > 0)
      o.detail += fmt::format("; next {} ({:.1f} us)", kernels::tiles_text(t.runner_up.tiles), t.runner_up.seconds * 1e6);
    o.evidence = fmt::format("{}; the tile search built and validated {} plan(s) of this shape on spec {}", what,
                             t.candidates, c.spec.name);
  } catch (const LimitError& e) {
    o.detail = "no tile option of the builder fits";
    o.evidence = fmt::format("{}; the tile search's default build fails too: {}", what, e.what());
  }
  return o;
}

}  // namespace

const std::vector<Entry>& registry() {
  static const std::vector<Entry> r = {
      {"transposed_weight", {"linear"}, "the oracle op with the weight transposed",
       "the weight is laid out transposed", transposed_weight},
      {"rope_pairing", {"rope"}, "RoPE with interleaved pairs (2i, 2i+1)",
       "RoPE rotates the wrong pairs", rope_pairing},
      {"rope_position_offset", {"rope"}, "RoPE with the table of positions P+k, k = +-1..4",
       "RoPE uses positions off by a constant", rope_offset},
      {"rope_table_precision", {"rope"}, "RoPE with the cos / sin table rounded / truncated to bf16",
       "the caller's RoPE table lost precision (bf16 instead of f32)", rope_table_precision},
      {"bias", {"bias_add"}, "the bias x0 and x2", "the bias is missing or applied twice", bias},
      {"gqa_head_mapping", {"attention_prefill", "attention_decode"},
       "attention with query head h reading KV head h % kv_heads", "the GQA head mapping is permuted", gqa_mapping},
      {"softmax_overflow", {"attention_prefill", "attention_decode"},
       "attention whose rows with a score * scale > ln(FLT_MAX) are NaN",
       "the softmax does not subtract the row max and overflows to inf", softmax_overflow},
      {"norm_eps_or_weight", {"rmsnorm", "head_rmsnorm"}, "the norm with eps x100 / x0.01, weight 1 or 1 + w",
       "the norm's epsilon or weight is wrong", norm},
      {"kv_position", {"kv_append"}, "the new KV rows written at pos +-1, +-2",
       "the KV cache is written at the wrong position", kv_position},
      {"kv_cache_rows", {"kv_append"}, "the cache fed to the call with an earlier row stale (its neighbour's) or zero",
       "the KV cache fed to the call differs from what earlier calls wrote: the caller kept a row wrong",
       kv_cache_rows},
      {"row_view_offset", {"*"}, "the op with its one-row input taken at rows +-1, +-2 of the value it is cut from",
       "the caller took the wrong row of a longer value (a bucketed prefill's last real token off by a few)",
       row_view_offset},
      {"layout_mismatch", {"*"}, "the op's output or an activation input in the transposed / head-major layout",
       "an activation layout mismatch between two dispatches", layout_mismatch},
      {"wrong_weight", {"*"}, "the op with each other same-size weight of its layer",
       "the op reads another tensor's weight", wrong_weight},
      {"device_limit", {"*"}, "the tile search on the op's shape and spec",
       "a device limit (L1 / L2, buffer descriptors, channels) with the chosen tiles", device_limit, false},
  };
  return r;
}

}  // namespace tessera::pipeline::diag
