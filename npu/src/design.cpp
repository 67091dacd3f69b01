#include "tessera/npu/design.h"

#include <fmt/format.h>

namespace tessera::npu {
namespace {

std::string quote(const std::string& s) { return "\"" + s + "\""; }

std::string pattern_text(const AccessPattern& p) {
  if (p.dims.empty() && p.offset == 0 && p.repeat == 1) return "contiguous";
  std::string dims;
  for (const auto& d : p.dims) dims += fmt::format("{}{}:{}", dims.empty() ? "" : ", ", d.size, d.stride);
  return fmt::format("pattern(offset={}, dims=[{}], repeat={})", p.offset, dims, p.repeat);
}

std::string param_text(const ParamValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return fmt::format("{}", *i);
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{:#}", *d);  // keeps "1.0" a float
  return quote(std::get<std::string>(v));
}

std::string port_text(CoreOp::Port p) { return p == CoreOp::Port::consume ? "consume" : "produce"; }

void dump_ops(std::string& out, const std::vector<CoreOp>& ops, int indent) {
  std::string pad(indent, ' ');
  for (const auto& op : ops) {
    switch (op.kind) {
      case CoreOp::Kind::loop:
        out += fmt::format("{}loop {} {{\n", pad, op.count);
        dump_ops(out, op.body, indent + 2);
        out += pad + "}\n";
        break;
      case CoreOp::Kind::acquire:
      case CoreOp::Kind::release:
        out += fmt::format("{}{} {} {} {}\n", pad, op.kind == CoreOp::Kind::acquire ? "acquire" : "release",
                           port_text(op.port), quote(op.fifo), op.count);
        break;
      case CoreOp::Kind::call: {
        std::string args, params;
        for (const auto& a : op.args) args += (args.empty() ? "" : ", ") + quote(a);
        for (const auto& [k, v] : op.params) params += fmt::format("{}{}={}", params.empty() ? "" : ", ", k, param_text(v));
        out += fmt::format("{}call {}({}) {{{}}}\n", pad, quote(op.kernel), args, params);
        break;
      }
    }
  }
}

std::string tiles_text(const std::vector<TileCoord>& ts) {
  std::string s;
  for (const auto& t : ts) s += (s.empty() ? "" : ", ") + to_string(t);
  return "[" + s + "]";
}

std::string names_text(const std::vector<std::string>& ns) {
  std::string s;
  for (const auto& n : ns) s += (s.empty() ? "" : ", ") + quote(n);
  return "[" + s + "]";
}

void dump_launch(std::string& out, const Launch& l) {
  out += fmt::format("  launch {} {{\n", quote(l.name));
  for (const auto& b : l.buffers) {
    std::string addr = b.address < 0 ? "auto" : fmt::format("0x{:x}", b.address);
    out += fmt::format("    buffer {} @{} bytes={} address={}\n", quote(b.name), to_string(b.tile), b.bytes, addr);
  }
  for (const auto& f : l.fifos) {
    out += fmt::format("    fifo {} {} -> {} depth={} object_bytes={} elem_bytes={}\n", quote(f.name),
                       to_string(f.producer), tiles_text(f.consumers), f.depth, f.object_bytes, f.elem_bytes);
    if (f.repeat != 1 || f.repeat_group != 1 || f.repeat_tail != 0)  // tail only when set (goldens)
      out += fmt::format("      repeat={} repeat_group={}{}\n", f.repeat, f.repeat_group,
                         f.repeat_tail != 0 ? fmt::format(" repeat_tail={}", f.repeat_tail) : "");
    if (f.producer_pattern != AccessPattern{})
      out += fmt::format("      producer_pattern {}\n", pattern_text(f.producer_pattern));
    for (size_t i = 0; i < f.consumer_patterns.size(); ++i)
      out += fmt::format("      consumer_pattern[{}] {}\n", i, pattern_text(f.consumer_patterns[i]));
  }
  for (const auto& k : l.links) {
    std::string offs;
    for (auto o : k.offsets_bytes) offs += fmt::format("{}{}", offs.empty() ? "" : ", ", o);
    out += fmt::format("    link @{} {} -> {} offsets_bytes=[{}]\n", to_string(k.tile), names_text(k.inputs),
                       names_text(k.outputs), offs);
  }
  for (const auto& c : l.cores) {
    out += fmt::format("    core @{} {{\n", to_string(c.tile));
    dump_ops(out, c.program, 6);
    out += "    }\n";
  }
  out += "    sequence {\n";
  for (const auto& t : l.sequence) {
    if (t.after_wait) out += "      wait\n";
    out += fmt::format("      dma {} {} {} {} {}\n", t.to_device ? "to_device" : "from_device", quote(t.fifo),
                       t.to_device ? "<-" : "->", quote(t.host_buffer), pattern_text(t.pattern));
  }
  out += "    }\n  }\n";
}

}  // namespace

std::string to_string(TileCoord t) { return fmt::format("({},{})", t.col, t.row); }

int64_t AccessPattern::elements_per_repeat() const {
  if (dims.empty()) return 0;  // contiguous: the caller knows the transfer size
  int64_t n = 1;
  for (const auto& d : dims) n *= d.size;
  return n;
}

std::string Design::dump() const {
  std::string out = fmt::format("design {} {{\n", quote(name));
  for (const auto& h : host_buffers)
    out += fmt::format("  host_buffer {} bytes={} elem_bytes={}\n", quote(h.name), h.bytes, h.elem_bytes);
  for (const auto& l : launches) dump_launch(out, l);
  out += "}\n";
  return out;
}

}  // namespace tessera::npu
