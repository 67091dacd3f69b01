// A row-wise op's output written in the blocked x layout of the gemm that
// reads it (kernels/builders/rowwise.h GemmXLayout). The row-major stream of
// the output is cut by the shim into the gemm's [m, k] blocks: per group of m
// rows that share an x buffer and M step, one task visits rows, then K blocks,
// then the k elements of a block (a partial row at a run's edge gets its own
// task). Every element is written exactly once, as pack_x of the gemm would
// write it; rows past M stay zero as the executor allocates them.
#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"
#include "tessera/kernels/builders/rowwise.h"
#include "tessera/npu/builder.h"

namespace tessera::kernels {
namespace {

namespace b = npu::build;

int64_t opt(const TileOptions& t, const char* key) {
  auto it = t.find(key);
  return it == t.end() ? 0 : it->second;
}

// Pattern dims outermost first; size-1 outer dims dropped (they move nothing).
npu::AccessPattern pattern(int64_t offset, std::vector<npu::Dim> dims, int64_t repeat) {
  npu::AccessPattern p;
  p.offset = offset;
  p.repeat = repeat;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].size > 1 || i + 1 == dims.size()) p.dims.push_back(dims[i]);
  return p;
}

}  // namespace

std::string gemm_x_buffer(int r) { return fmt::format("x_r{}", r); }

GemmXLayout gemm_x_layout(const std::string& what, const TileOptions& tiles, int64_t M, int64_t K,
                          const npu::DeviceSpec& spec) {
  GemmXLayout g;
  g.m = opt(tiles, kGemmXM);
  if (g.m <= 0) return {};
  g.k = opt(tiles, kGemmXK);
  g.R = opt(tiles, kGemmXRows);
  g.M = M;
  g.K = K;
  if (g.k < 1 || g.R < 1 || (M > 1 && K % g.k != 0) || g.k > spec.bd_max_wrap || g.m > spec.bd_max_size ||
      g.kb() > spec.bd_max_size || g.m * g.k > spec.bd_max_stride)
    throw_error<LimitError>("{}: the gemm x layout (m={} k={} rows={}) needs K={} in whole k "
                            "blocks and blocks within the shim BD wrap {} / size {} / stride {} "
                            "of {}", what, g.m, g.k, g.R, K, spec.bd_max_wrap, spec.bd_max_size,
                            spec.bd_max_stride, spec.name);
  return g;
}

void add_gemm_x_writes(std::vector<npu::DmaTask>& out, const std::string& fifo,
                       const GemmXLayout& g, int64_t a, int64_t b_end, int64_t repeat,
                       const npu::DeviceSpec& spec, const std::string& what) {
  if (g.M == 1) {  // one row: its k blocks follow each other, zero padding after K
    out.push_back(b::from_device(fifo, gemm_x_buffer(0),
                                 span_pattern(a, b_end - a, g.buffer_elems(), repeat, spec, what)));
    return;
  }
  std::vector<npu::DmaTask> tasks;
  auto put = [&](int64_t row, int64_t col, std::vector<npu::Dim> dims) {
    tasks.push_back(b::from_device(fifo, gemm_x_buffer(g.buffer(row)),
                                   pattern(g.index(row, col), std::move(dims), 1)));
  };
  // A piece of one row: whole k blocks from col0.
  auto segment = [&](int64_t row, int64_t col0, int64_t col1) {
    if (col0 % g.k || col1 % g.k)
      throw_error<LimitError>("{}: a run of the gemm x layout starts or ends inside a k={} block "
                              "(row {}, columns {}..{})", what, g.k, row, col0, col1);
    put(row, col0, {{(col1 - col0) / g.k, g.m * g.k}, {g.k, 1}});
  };
  for (int64_t e = a; e < b_end;) {
    const int64_t row = e / g.K, col = e % g.K;
    const int64_t group_end = std::min(b_end, (row / g.m * g.m + g.m) * g.K);
    if (col != 0) {  // the rest of a row the run starts inside
      const int64_t end = std::min(group_end, (row + 1) * g.K);
      segment(row, col, end - row * g.K);
      e = end;
    } else if (const int64_t rows = (group_end - e) / g.K; rows > 0) {
      put(row, 0, {{rows, g.k}, {g.kb(), g.m * g.k}, {g.k, 1}});
      e += rows * g.K;
    } else {  // the start of a row the run ends inside
      segment(row, 0, group_end - e);
      e = group_end;
    }
  }
  if (tasks.size() == 1) {
    tasks.front().pattern.repeat = repeat;
    repeat = 1;
  }
  for (int64_t i = 0; i < repeat; ++i) out.insert(out.end(), tasks.begin(), tasks.end());
}

}  // namespace tessera::kernels
