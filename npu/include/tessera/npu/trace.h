#pragma once
// Chrome / Perfetto trace-event JSON (chrome://tracing, ui.perfetto.dev) of a
// timing estimate: one process per dispatch, one track ("thread") for the
// dispatch itself (overhead and launch spans), one per compute tile (its busy
// time in each launch) and one per shim channel (its transfer time). Times are
// the model's, laid out from t = 0; durations in microseconds as the format wants.
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/npu/timing.h"

namespace tessera::npu {

nlohmann::json chrome_trace(const DispatchTiming& timing);
// Writes chrome_trace() to `path`; throws FileError when it cannot.
void write_chrome_trace(const DispatchTiming& timing, const std::string& path);

}  // namespace tessera::npu
