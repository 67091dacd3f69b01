#pragma once
// Tile search: for one operator instance, time every legal tile option its
// builder proposes (OpBuilder::tile_candidates) with the static timing model
// (npu::estimate_time) and keep the fastest. This is what the compiler's
// tune-tiles pass calls; `tessera tune` prints it per model.
//
// "Legal" = the builder builds and validates it on the spec (a LimitError /
// DesignError drops the candidate). Candidates that build to the same plan
// (BuiltOp::tiles) are timed once. Ties keep the earlier candidate, and the
// builder's default comes first, so the choice is deterministic and only
// moves away from the default for a strictly faster prediction.
//
// Results are cached per (spec, op shape, fixed options) for the process.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/kernels/op_builder.h"

namespace tessera::kernels {

struct TileTiming {
  TileOptions tiles;      // the options as built (BuiltOp::tiles)
  double seconds = 0;     // estimate_time total (dispatch overhead included)
  std::string bound;      // estimate_time's dispatch bound
};

struct TileChoice {
  TileTiming best;
  TileTiming runner_up;   // seconds 0 when only one plan was legal
  TileTiming builder_default;
  int64_t candidates = 0; // distinct legal plans timed
  // Every distinct legal plan timed, the default first then candidate order:
  // a caller that must reject some (tune-tiles keeps activation layouts) walks
  // them fastest first.
  std::vector<TileTiming> timed;
};

// `fixed` options are imposed on every candidate (e.g. the layout policy's
// k / n of a prefill linear, so that the packed weights do not depend on M).
// Throws what the builder throws when not even the default builds.
TileChoice search_tiles(const OpShape& shape, const npu::DeviceSpec& spec,
                        const TileOptions& fixed = {});

// "k=64 m=1 n=8" (key order).
std::string tiles_text(const TileOptions& t);

}  // namespace tessera::kernels
