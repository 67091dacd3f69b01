// parse_plan (plan.h): reads the plan IR text Plan::dump() writes. The graph,
// the steps' grouping, kinds and tiles, and the buffers' lifetimes and arena
// offsets are decisions and come from the text; designs, timings and layout
// keys are consequences, rebuilt through the DesignCache and compared with the
// keys the text recorded (a mismatch means the plan was made by other builders
// or for another device: refused).
#include <sstream>

#include <fmt/format.h>

#include "passes_internal.h"
#include "plan_text.h"
#include "tessera/compiler/passes.h"
#include "tessera/core/error.h"

namespace tessera::compiler {

namespace {

class Lines {
 public:
  explicit Lines(const std::string& text) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines_.push_back(l);
  }
  bool done() const { return i_ >= lines_.size(); }
  const std::string& peek() const { return lines_.at(i_); }
  const std::string& next() {
    if (done()) fail("unexpected end of plan text");
    return lines_[i_++];
  }
  // Names the line last read (1-based).
  [[noreturn]] void fail(const std::string& what) const {
    throw_error<InputError>("plan text line {}: {}", i_, what);
  }

 private:
  std::vector<std::string> lines_;
  size_t i_ = 0;
};

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t a = 0;
  while (true) {
    const size_t b = s.find(sep, a);
    out.push_back(s.substr(a, b - a));
    if (b == std::string::npos) return out;
    a = b + 1;
  }
}

// "key=value" -> value, failing with the line when the key differs.
std::string field(const Lines& in, const std::string& word, const std::string& key) {
  if (!word.starts_with(key + "=")) in.fail(fmt::format("expected {}=..., got '{}'", key, word));
  return word.substr(key.size() + 1);
}

// The whole word as a number (std::stoll / std::stod), else a line error.
template <class T, class F>
T to_number(const Lines& in, const std::string& s, F convert, const char* what) {
  try {
    size_t n = 0;
    const T v = convert(s, &n);
    if (n == s.size()) return v;
  } catch (const std::exception&) {
  }
  in.fail(fmt::format("'{}' is not {}", s, what));
}

int64_t to_int(const Lines& in, const std::string& s) {
  return to_number<int64_t>(in, s, [](const std::string& t, size_t* n) { return std::stoll(t, n); },
                            "an integer");
}

double to_double(const Lines& in, const std::string& s) {
  return to_number<double>(in, s, [](const std::string& t, size_t* n) { return std::stod(t, n); },
                           "a number");
}

ValueRef parse_ref(const Lines& in, std::string s) {
  ValueRef r;
  if (s.starts_with("w:")) r.kind = ValueKind::weight, s = s.substr(2);
  else if (s.starts_with("host:")) r.kind = ValueKind::host, s = s.substr(5);
  if (s.ends_with("[-1]")) r.last_row = true, s.resize(s.size() - 4);
  const size_t dot = s.find('.');
  if (s.starts_with("L") && dot != std::string::npos && dot > 1) {
    r.layer = static_cast<int>(to_int(in, s.substr(1, dot - 1)));
    s = s.substr(dot + 1);
  }
  if (s.empty()) in.fail("empty value name");
  r.name = s;
  return r;
}

// "  n3 L0 q linear K=.. M=.. N=.. | eps=.. : in1,in2 -> out"
Node parse_node(Lines& in, size_t index) {
  const auto w = words(in.next());
  if (w.size() < 8 || w[0] != fmt::format("n{}", index)) in.fail(fmt::format("expected node n{}", index));
  Node n;
  n.layer = w[1] == "M" ? -1 : static_cast<int>(to_int(in, w[1].substr(1)));
  n.name = w[2];
  n.shape.op = w[3];
  size_t i = 4;
  for (; i < w.size() && w[i] != "|"; ++i) {
    const auto kv = split(w[i], '=');
    if (kv.size() != 2) in.fail(fmt::format("bad dim '{}'", w[i]));
    n.shape.dims[kv[0]] = to_int(in, kv[1]);
  }
  for (++i; i < w.size() && w[i] != ":"; ++i) {
    const auto kv = split(w[i], '=');
    if (kv.size() != 2) in.fail(fmt::format("bad attr '{}'", w[i]));
    n.shape.attrs[kv[0]] = to_double(in, kv[1]);
  }
  if (i + 3 >= w.size() || w[i + 2] != "->") in.fail("expected ': inputs -> output'");
  if (w[i + 1] != "-")
    for (const auto& r : split(w[i + 1], ',')) n.inputs.push_back(parse_ref(in, r));
  n.output = parse_ref(in, w[i + 3]);
  return n;
}

kernels::TileOptions parse_tiles(const Lines& in, const std::string& s) {
  kernels::TileOptions t;
  if (s == "-") return t;
  for (const auto& kv : split(s, ',')) {
    const auto p = split(kv, '=');
    if (p.size() != 2) in.fail(fmt::format("bad tile '{}'", kv));
    t[p[0]] = to_int(in, p[1]);
  }
  return t;
}

struct Recorded {
  size_t step, launch;
  std::string in, w, out;
};

void parse_steps(Lines& in, Plan& p, const npu::DeviceSpec& spec, std::vector<Recorded>& recorded) {
  const auto head = words(in.next());
  if (head.empty() || head[0] != "steps") in.fail("expected 'steps'");
  while (!in.done() && in.peek().starts_with("  ") && !in.peek().starts_with("    ")) {
    const auto w = words(in.next());
    Step s;
    if (w.empty() || (w[0] != "npu" && w[0] != "host")) in.fail("expected a step (npu | host)");
    s.kind = w[0] == "npu" ? StepKind::npu : StepKind::host;
    while (!in.done() && in.peek().starts_with("    ")) {
      const auto lw = words(in.next());
      if (lw.size() < 5 || !lw[0].starts_with("n")) in.fail("expected a launch 'n<node> ...'");
      const auto node = static_cast<size_t>(to_int(in, lw[0].substr(1)));
      if (node >= p.graph.nodes.size()) in.fail(fmt::format("node n{} does not exist", node));
      const bool host = lw[1] == "host";
      if (host != (s.kind == StepKind::host)) in.fail("launch kind differs from its step's");
      Launch l = detail::place_launch(p, node, host, spec);
      if (!host) l.tiles = parse_tiles(in, field(in, lw[1], "tiles"));
      recorded.push_back({p.steps.size(), s.launches.size(), field(in, lw[2], "in"),
                          field(in, lw[3], "w"), field(in, lw[4], "out")});
      s.launches.push_back(std::move(l));
    }
    if (s.launches.empty()) in.fail("a step without launches");
    p.steps.push_back(std::move(s));
  }
}

BufferKind parse_kind(const Lines& in, const std::string& s) {
  for (BufferKind k : {BufferKind::weight, BufferKind::activation, BufferKind::kv_cache, BufferKind::io})
    if (s == detail::buffer_kind_name(k)) return k;
  in.fail(fmt::format("unknown buffer kind '{}'", s));
}

int64_t dash_or_int(const Lines& in, const std::string& s) { return s == "-" ? -1 : to_int(in, s); }

void parse_buffers(Lines& in, Plan& p) {
  const auto head = words(in.next());
  if (head.empty() || head[0] != "buffers") in.fail("expected 'buffers'");
  while (!in.done() && in.peek().starts_with("  ")) {
    const auto w = words(in.next());
    if (w.size() != 5 || !w[4].starts_with("@")) in.fail("expected 'kind name bytes live=a..b @offset'");
    BufferDecl b{w[1], parse_kind(in, w[0]), to_int(in, w[2]), -1, -1, -1};
    const std::string live = field(in, w[3], "live");
    const size_t dots = live.find("..");
    if (dots == std::string::npos) in.fail("expected live=a..b");
    b.first = dash_or_int(in, live.substr(0, dots));
    b.last = dash_or_int(in, live.substr(dots + 2));
    b.offset = dash_or_int(in, w[4].substr(1));
    p.buffers.push_back(std::move(b));
  }
}

std::string joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ",") + (k.empty() ? std::string("-") : k);
  return out.empty() ? "-" : out;
}

}  // namespace

Plan parse_plan(const std::string& text, DesignCache& cache) {
  Lines in(text);
  Plan p;
  auto w = words(in.next());
  if (w.size() != 7 || w[0] != "plan") in.fail("expected 'plan <model> style= S= P= context= spec='");
  p.model = w[1];
  p.style = parse_plan_style(field(in, w[2], "style"));
  p.seq = to_int(in, field(in, w[3], "S"));
  p.past = to_int(in, field(in, w[4], "P"));
  p.context = to_int(in, field(in, w[5], "context"));
  p.spec = field(in, w[6], "spec");
  if (p.spec != cache.spec().name)
    throw_error<InputError>("plan for {} was made for device spec '{}', not '{}'", p.model, p.spec,
                            cache.spec().name);
  w = words(in.next());
  if (w.size() != 3 || w[0] != "host") in.fail("expected 'host bytes_per_second= step_overhead_seconds='");
  p.host.bytes_per_second = to_double(in, field(in, w[1], "bytes_per_second"));
  p.host.step_overhead_seconds = to_double(in, field(in, w[2], "step_overhead_seconds"));
  w = words(in.next());
  if (w.size() != 2 || w[0] != "passes") in.fail("expected 'passes a,b,c'");
  if (w[1] != "-") p.passes = split(w[1], ',');
  w = words(in.next());
  if (w.size() != 2 || w[0] != "nodes") in.fail("expected 'nodes N'");
  const int64_t n = to_int(in, w[1]);
  p.graph.model = p.model;
  p.graph.seq = p.seq;
  p.graph.past = p.past;
  for (int64_t i = 0; i < n; ++i) p.graph.nodes.push_back(parse_node(in, static_cast<size_t>(i)));
  std::vector<Recorded> recorded;
  parse_steps(in, p, cache.spec(), recorded);
  parse_buffers(in, p);
  detail::build_launches(p, cache);
  for (const Recorded& r : recorded) {
    const Launch& l = p.steps[r.step].launches[r.launch];
    if (joined(l.in_layouts) != r.in || joined(l.weight_layouts) != r.w || l.out_layout != r.out)
      throw_error<InputError>("plan for {}: launch {} was recorded with layouts in={} w={} out={}, the "
                              "builders now give in={} w={} out={} (stale plan: recompile it)",
                              p.model, l.name, r.in, r.w, r.out, joined(l.in_layouts),
                              joined(l.weight_layouts), l.out_layout);
  }
  update_costs(p, cache.spec());
  return p;
}

}  // namespace tessera::compiler
