#include "tessera/runtime/profile.h"

#include <algorithm>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera::runtime {

namespace {

// A name without its layers ("L3.q" -> "q", "L3.attn_norm..L3.v" -> "attn_norm..v"):
// the same launch of every layer is one row.
std::string step_kind(const std::string& name) {
  static const std::regex layer(R"((^|\.)L[0-9]+\.)");
  return std::regex_replace(name, layer, "$1");
}

}  // namespace

std::vector<OpProfileRow> decode_profile(const GenerateResult& r) {
  if (r.decode.empty()) throw_error<UsageError>("profile: the generation made no decode call");
  std::map<std::string, OpProfileRow> by_op;
  double plan = 0, rest = 0;
  OpProfileRow step_overhead{"dispatch", 0, 0, 0};
  for (size_t i = 0; i < r.decode.size(); ++i) {
    const CallTiming& c = r.decode[i];
    if (c.steps.empty())
      throw_error<UsageError>("profile: decode call {} kept no step records (SessionOptions::profile off)", i);
    double in_steps = 0;
    for (const StepRecord& s : c.steps) {
      double host = 0, predicted = 0;
      for (const LaunchRecord& l : s.launches) {
        const std::string kind = step_kind(l.name);
        OpProfileRow& row = by_op[kind];
        row.op = kind;
        row.steps_per_token += 1;
        row.predicted_ms += l.predicted_seconds * 1e3;
        row.host_ms += l.host_seconds * 1e3;
        host += l.host_seconds;
        predicted += l.predicted_seconds;
      }
      step_overhead.steps_per_token += 1;
      step_overhead.predicted_ms += (s.predicted_seconds - predicted) * 1e3;
      step_overhead.host_ms += (s.host_seconds - host) * 1e3;
      in_steps += s.host_seconds;
    }
    plan += c.plan_host_seconds * 1e3;
    rest += (c.host_seconds - c.plan_host_seconds - in_steps) * 1e3;
  }
  const auto n = static_cast<double>(r.decode.size());
  std::vector<OpProfileRow> rows;
  for (auto& [op, row] : by_op) {
    row.steps_per_token /= n;
    row.predicted_ms /= n;
    row.host_ms /= n;
    rows.push_back(row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.host_ms > b.host_ms; });
  rows.push_back({"dispatch", step_overhead.steps_per_token / n, step_overhead.predicted_ms / n,
                  step_overhead.host_ms / n});
  rows.push_back({"plan", 0, 0, plan / n});
  rows.push_back({"rest", 0, 0, rest / n});
  return rows;
}

std::string format_profile(const std::vector<OpProfileRow>& rows) {
  double host = 0, predicted = 0, steps = 0;
  for (const auto& r : rows) {
    host += r.host_ms;
    predicted += r.predicted_ms;
    steps += r.steps_per_token;
  }
  std::string out = fmt::format("{:<24} {:>9} {:>14} {:>12} {:>7}\n", "decode launch", "per token",
                                "predicted ms", "host ms", "host %");
  auto line = [&](const std::string& op, double n, double p, double h) {
    out += fmt::format("{:<24} {:>9.1f} {:>14.4f} {:>12.3f} {:>6.1f}%\n", op, n, p, h,
                       host > 0 ? 100 * h / host : 0.0);
  };
  for (const auto& r : rows) line(r.op, r.steps_per_token, r.predicted_ms, r.host_ms);
  line("total", steps, predicted, host);
  return out;
}

}  // namespace tessera::runtime
