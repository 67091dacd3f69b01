// report.html (report_html.h). Every chart is plain SVG drawn here; colours
// of bounding terms are one table so every chart agrees.
#include "tessera/pipeline/report_html.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/compiler/plan.h"
#include "tessera/core/error.h"
#include "tessera/npu/device_spec.h"

namespace tessera::pipeline {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::optional<json> load(const fs::path& f) {
  std::ifstream in(f);
  if (!in) return std::nullopt;
  auto j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

const char* bound_colour(const std::string& b) {
  static const std::map<std::string, const char*> c = {
      {"overhead", "#9e9e9e"}, {"compute", "#1f77b4"}, {"vector", "#17becf"}, {"stream", "#ff7f0e"},
      {"dma", "#bcbd22"},      {"ddr", "#d62728"},     {"fill_drain", "#9467bd"}, {"host", "#8c564b"},
      {"relayout", "#e377c2"}};
  auto it = c.find(b);
  return it == c.end() ? "#444444" : it->second;
}

std::string legend(const std::vector<std::string>& bounds) {
  std::string o = "<p class=\"legend\">";
  for (const auto& b : bounds)
    o += fmt::format("<span><svg width=\"12\" height=\"12\"><rect width=\"12\" height=\"12\" fill=\"{}\"/></svg> {}</span> ",
                     bound_colour(b), esc(b));
  return o + "</p>\n";
}

std::string status_class(const std::string& s) {
  if (s == "failed" || s == "FAIL" || s == "fail") return "bad";
  if (s == "warning" || s == "PASS-with-warnings") return "warn";
  return "good";
}

std::string gate_table(const json& rep) {
  std::string o = "<h2>Gates per phase</h2>\n<table><tr><th>phase</th><th>name</th><th>status</th><th>checks</th>"
                  "<th>failed</th><th>host s</th></tr>\n";
  for (const auto& p : rep.value("phases", json::array())) {
    int failed = 0;
    for (const auto& c : p.value("checks", json::array())) failed += c.value("passed", true) ? 0 : 1;
    const std::string st = p.value("status", "");
    o += fmt::format("<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td></tr>\n",
                     status_class(st), p.value("phase", -1), esc(p.value("name", "")), esc(st),
                     p.value("checks", json::array()).size(), failed, p.value("host_seconds", 0.0));
  }
  o += "</table>\n";
  for (const auto& p : rep.value("phases", json::array())) {
    o += fmt::format("<details><summary>phase {} ({}): checks</summary>\n<table><tr><th>check</th><th>passed</th>"
                     "<th>max_rel</th><th>limit</th><th>cosine</th><th>floor</th><th>message</th></tr>\n",
                     p.value("phase", -1), esc(p.value("name", "")));
    for (const auto& c : p.value("checks", json::array())) {
      const json m = c.value("metrics", json::object()), t = c.value("threshold", json::object());
      o += fmt::format("<tr class=\"{}\"><td>{}</td><td>{}</td><td>{:.3g}</td><td>{:.3g}</td><td>{:.6f}</td><td>{:.6f}</td><td>{}</td></tr>\n",
                       c.value("passed", true) ? "good" : "bad", esc(c.value("name", "")), c.value("passed", true),
                       m.value("max_rel", 0.0), t.value("max_rel", 0.0), m.value("cosine", 1.0),
                       t.value("min_cosine", 1.0), esc(c.value("message", "")));
    }
    o += "</table></details>\n";
  }
  return o;
}

// 1 - cosine per layer on a log axis (cosines near 1 are invisible on a linear one).
std::string cosine_chart(const std::optional<json>& p3, const std::optional<json>& ev) {
  std::vector<std::pair<std::string, std::vector<double>>> series;
  if (p3) {
    std::vector<double> got, floor;
    for (const auto& c : p3->value("checks", json::array()))
      if (c.value("name", "").ends_with(".h_out")) {
        got.push_back(c["metrics"].value("cosine", 1.0));
        floor.push_back(c["threshold"].value("min_cosine", 1.0));
      }
    series.push_back({"phase 3 gate prompt", got});
    series.push_back({"phase 3 floor", floor});
  }
  if (ev && ev->contains("measures"))
    for (const auto& p : (*ev)["measures"].value("prompts", json::array()))
      series.push_back({fmt::format("evaluator, {}-token prompt", p.value("tokens", 0)),
                        p.value("layer_cosine", std::vector<double>{})});
  if (series.empty()) return "<p>No per-layer cosines (phase3.json and evaluation.json missing).</p>\n";
  size_t layers = 1;
  double lo = 1e-9, hi = 1e-1;
  for (const auto& [n, v] : series) {
    layers = std::max(layers, v.size());
    for (double c : v) lo = std::min(lo, std::max(1 - c, 1e-12));
  }
  const double W = 900, H = 300, L = 70, B = 30;
  auto X = [&](size_t i) { return L + (W - L - 20) * (layers > 1 ? static_cast<double>(i) / static_cast<double>(layers - 1) : 0.5); };
  auto Y = [&](double c) { return 10 + (H - B - 10) * (std::log10(hi) - std::log10(std::clamp(1 - c, lo, hi))) / (std::log10(hi) - std::log10(lo)); };
  std::string o = fmt::format("<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">\n", W, H);
  for (double e = std::ceil(std::log10(lo)); e <= std::log10(hi); e += 1)
    o += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/><text x=\"4\" y=\"{:.1f}\" class=\"ax\">1-cos 1e{}</text>\n",
                     L, W - 20, Y(1 - std::pow(10, e)), Y(1 - std::pow(10, e)), Y(1 - std::pow(10, e)) + 4, e);
  for (size_t i = 0; i < layers; ++i)
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"ax\">L{}</text>\n", X(i) - 6, H - 8, i);
  static const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"};
  std::string leg = "<p class=\"legend\">";
  for (size_t s = 0; s < series.size(); ++s) {
    const char* col = kColours[s % 7];
    std::string pts;
    for (size_t i = 0; i < series[s].second.size(); ++i) pts += fmt::format("{:.1f},{:.1f} ", X(i), Y(series[s].second[i]));
    o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", pts, col,
                     series[s].first.find("floor") != std::string::npos ? " stroke-dasharray=\"6 4\"" : "");
    leg += fmt::format("<span style=\"color:{}\">&#9632; {}</span> ", col, esc(series[s].first));
  }
  return o + "</svg>\n" + leg + "</p>\n";
}

std::string timeline(const compiler::Plan& p, const std::string& title) {
  const double W = 1200, total = std::max(p.predicted_seconds(), 1e-30);
  std::string o = fmt::format("<h3>{}: {} steps, {} NPU dispatches, {:.3f} ms predicted</h3>\n<svg width=\"{}\" height=\"40\" "
                              "xmlns=\"http://www.w3.org/2000/svg\">\n",
                              esc(title), p.steps.size(), p.dispatches(), total * 1e3, W);
  double x = 0;
  for (const compiler::Step& s : p.steps) {
    const double w = W * s.seconds() / total;
    o += fmt::format("<rect x=\"{:.2f}\" y=\"2\" width=\"{:.2f}\" height=\"36\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.3\">"
                     "<title>{} ({}): {:.1f} us, {}</title></rect>\n",
                     x, std::max(w, 0.2), bound_colour(s.bound()), esc(s.name()), esc(s.front().shape.op), s.seconds() * 1e6,
                     esc(s.bound()));
    x += w;
  }
  return o + "</svg>\n";
}

std::string shares(const compiler::Plan& p, const std::string& title) {
  const auto by = p.bound_seconds();
  double total = 0;
  for (const auto& [b, s] : by) total += s;
  total = std::max(total, 1e-30);
  std::string o = fmt::format("<p>{}</p><svg width=\"900\" height=\"28\" xmlns=\"http://www.w3.org/2000/svg\">\n", esc(title));
  double x = 0;
  for (const auto& [b, s] : by) {
    const double w = 900 * s / total;
    o += fmt::format("<rect x=\"{:.2f}\" y=\"2\" width=\"{:.2f}\" height=\"24\" fill=\"{}\"><title>{} {:.1f}%</title></rect>\n", x, w,
                     bound_colour(b), esc(b), 100 * s / total);
    if (w > 60) o += fmt::format("<text x=\"{:.1f}\" y=\"19\" class=\"in\">{} {:.0f}%</text>\n", x + 4, esc(b), 100 * s / total);
    x += w;
  }
  return o + "</svg>\n";
}

// Achieved MAC/s of every NPU dispatch against min(peak MAC/s, DDR bandwidth x intensity).
std::string roofline(const std::vector<const compiler::Plan*>& plans, const npu::DeviceSpec& spec) {
  const double peak = spec.clock_hz * spec.macs_per_cycle_bf16 * spec.compute_tiles(), bw = spec.ddr_bytes_per_second;
  const double W = 900, H = 420, L = 80, B = 40, x0 = -3, x1 = 4, y0 = 6, y1 = std::ceil(std::log10(peak)) + 0.5;
  auto X = [&](double v) { return L + (W - L - 20) * (std::clamp(std::log10(v), x0, x1) - x0) / (x1 - x0); };
  auto Y = [&](double v) { return H - B - (H - B - 10) * (std::clamp(std::log10(v), y0, y1) - y0) / (y1 - y0); };
  std::string o = fmt::format("<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">\n", W, H);
  for (double e = x0; e <= x1; e += 1)
    o += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"10\" y2=\"{1}\" class=\"grid\"/><text x=\"{0:.1f}\" y=\"{2}\" class=\"ax\">1e{3}</text>\n",
                     X(std::pow(10, e)), H - B, H - B + 16, e);
  for (double e = y0; e <= y1; e += 1)
    o += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" class=\"grid\"/><text x=\"4\" y=\"{3:.1f}\" class=\"ax\">1e{4} MAC/s</text>\n",
                     L, W - 20, Y(std::pow(10, e)), Y(std::pow(10, e)) + 4, e);
  std::string roof;
  for (double e = x0; e <= x1 + 1e-9; e += 0.05) roof += fmt::format("{:.1f},{:.1f} ", X(std::pow(10, e)), Y(std::min(peak, bw * std::pow(10, e))));
  o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#000\" stroke-width=\"2\"/>\n", roof);
  o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"ax\">peak {:.3g} MAC/s; DDR {:.3g} GB/s (spec {})</text>\n", L + 10, Y(peak) - 6, peak,
                   bw / 1e9, esc(spec.name));
  o += fmt::format("<text x=\"{}\" y=\"{}\" class=\"ax\">MAC per DDR byte</text>\n", W / 2, H - 4);
  for (const compiler::Plan* p : plans)
    for (const compiler::Step& s : p->steps) {
      if (s.kind != compiler::StepKind::npu) continue;
      double macs = 0, bytes = 0;
      for (const auto& l : s.launches) macs += static_cast<double>(l.timing->macs), bytes += static_cast<double>(l.timing->ddr_bytes);
      const double x = bytes > 0 ? std::max(macs, 1.0) / bytes : 1e-3, y = std::max(macs, 1.0) / std::max(s.dispatch_seconds, 1e-30);
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" fill-opacity=\"0.7\"><title>{} S={}: {:.3g} MAC, {:.3g} B, "
                       "{:.1f} us, {}</title></circle>\n",
                       X(x), Y(y), p->seq > 1 ? 5 : 3, bound_colour(s.bound()), esc(s.name()), p->seq, macs, bytes,
                       s.dispatch_seconds * 1e6, esc(s.bound()));
    }
  return o + "</svg>\n<p class=\"note\">Large dots: prefill dispatches; small: decode. Dispatches with no MACs sit on the "
             "bottom edge. Every time is a prediction of the timing model.</p>\n";
}

std::string trajectory(const fs::path& dir) {
  std::string o = "<h2>Optimization trajectory (phases 4 and 5, predicted)</h2>\n<table><tr><th>phase</th><th>pass</th><th>prefill ms "
                  "before &#8594; after</th><th>decode ms before &#8594; after</th><th>moved</th><th>verdict</th></tr>\n";
  int rows = 0;
  for (int ph : {4, 5}) {
    const auto j = load(dir / fmt::format("phase{}.json", ph));
    if (!j) continue;
    for (const auto& t : (*j)["details"].value("tried", json::array())) {
      ++rows;
      const bool kept = t.value("kept", false);
      o += fmt::format("<tr class=\"{}\"><td>{}</td><td>{}</td><td>{:.3f} &#8594; {:.3f}</td><td>{:.3f} &#8594; {:.3f}</td><td>{}</td><td>{}</td></tr>\n",
                       kept ? "good" : "bad", ph, esc(t.value("pass", "")), 1e3 * t.value("prefill_before", 0.0),
                       1e3 * t.value("prefill_after", 0.0), 1e3 * t.value("decode_before", 0.0), 1e3 * t.value("decode_after", 0.0),
                       esc(t.value("moved", "")), kept ? "kept" : esc("rolled back: " + t.value("failure", "")));
    }
  }
  return rows ? o + "</table>\n" : "<h2>Optimization trajectory</h2><p>phase4.json / phase5.json missing.</p>\n";
}

std::string verdict(const std::optional<json>& ev) {
  if (!ev) return "<h2>Evaluation (phase 7)</h2><p class=\"bad\">No evaluation.json: phase 7 has not run.</p>\n";
  const std::string v = ev->value("verdict", "?");
  std::string o = fmt::format("<h2>Evaluation (phase 7)</h2>\n<p class=\"verdict {}\">{}</p>\n<table><tr><th>area</th><th>check</th>"
                              "<th>result</th><th>evidence</th></tr>\n",
                              status_class(v), esc(v));
  for (const auto& c : ev->value("checks", json::array()))
    o += fmt::format("<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", status_class(c.value("severity", "")),
                     esc(c.value("area", "")), esc(c.value("name", "")), esc(c.value("severity", "")), esc(c.value("evidence", "")));
  return o + "</table>\n";
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1300px}"
    "table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}"
    "tr.good td{background:#e8f5e9}tr.bad td{background:#ffebee}tr.warn td{background:#fff8e1}"
    ".verdict{font-size:22px;font-weight:bold;padding:6px 12px;display:inline-block}"
    ".verdict.good{background:#c8e6c9}.verdict.bad{background:#ffcdd2}.verdict.warn{background:#ffecb3}"
    ".grid{stroke:#ddd;stroke-width:1}.ax{font-size:11px;fill:#555}.in{font-size:12px;fill:#fff}"
    ".legend span{margin-right:14px;font-size:13px}.note{font-size:12px;color:#555}";

}  // namespace

std::string report_html(const fs::path& dir) {
  const auto rep = load(dir / "report.json");
  const auto ev = load(dir / "evaluation.json");
  std::string body = fmt::format("<h1>tessera deployment: {}</h1>\n", esc(rep ? rep->value("model", "?") : dir.filename().string()));
  body += ev ? fmt::format("<p class=\"verdict {}\">phase 7: {}</p>\n", status_class(ev->value("verdict", "")), esc(ev->value("verdict", "?")))
             : "";
  body += rep ? gate_table(*rep) : "<p class=\"bad\">No report.json.</p>\n";
  body += "<h2>Per-layer cosine against the FP32 oracle (h_out)</h2>\n" + cosine_chart(load(dir / "phase3.json"), ev);
  const auto sj = load(dir / "spec.json");
  std::ifstream pin(dir / "plan_final.txt");
  std::stringstream ss;
  ss << pin.rdbuf();
  const std::string text = ss.str();
  const size_t cut = text.find("\nplan ");
  if (sj && cut != std::string::npos) {
    try {
      const npu::DeviceSpec spec = npu::DeviceSpec::from_json(*sj);
      compiler::DesignCache cache(spec);
      const compiler::Plan pre = compiler::parse_plan(text.substr(0, cut + 1), cache);
      const compiler::Plan dec = compiler::parse_plan(text.substr(cut + 1), cache);
      body += "<h2>Per-dispatch timeline (predicted; each row scaled to its own call)</h2>\n";
      body += timeline(pre, fmt::format("prefill S={}", pre.seq)) + timeline(dec, fmt::format("decode step at position {}", dec.past));
      body += legend({"overhead", "compute", "vector", "stream", "dma", "ddr", "fill_drain", "host", "relayout"});
      body += "<h2>Shares of the bounding terms</h2>\n" + shares(pre, "prefill") + shares(dec, "decode");
      body += "<h2>Roofline of every dispatch</h2>\n" + roofline({&pre, &dec}, spec);
    } catch (const std::exception& e) {
      body += fmt::format("<p class=\"bad\">plan_final.txt does not parse back: {}</p>\n", esc(e.what()));
    }
  } else {
    body += "<p class=\"bad\">No plan_final.txt / spec.json: no timeline or roofline.</p>\n";
  }
  body += trajectory(dir) + verdict(ev);
  return fmt::format("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head><meta charset=\"utf-8\"/>"
                     "<title>tessera report</title><style>{}</style></head>\n<body>\n{}</body>\n</html>\n",
                     kStyle, body);
}

void write_report_html(const fs::path& dir) {
  const fs::path tmp = dir / "report.html.tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw_error<FileError>("cannot write {}", tmp.string());
    out << report_html(dir);
  }
  fs::rename(tmp, dir / "report.html");
}

}  // namespace tessera::pipeline
