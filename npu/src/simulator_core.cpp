// Core side of the simulator: core programs compiled to a flat instruction list
// (names resolved once), then interpreted until they block on a FIFO.
#include <fmt/format.h>

#include "simulator_state.h"
#include "simulator_trace.h"
#include "validator_rules.h"

namespace tessera::npu::sim {
namespace {

struct Compiler {
  LaunchState& st;
  CoreState& cs;
  const KernelRegistry& registry;

  int port(const std::string& fifo, bool produce) {
    for (size_t i = 0; i < cs.ports.size(); ++i)
      if (cs.ports[i].fifo == fifo && cs.ports[i].produce == produce) return static_cast<int>(i);
    auto it = st.layout->endpoint_pool.find({fifo, cs.tile});
    if (it == st.layout->endpoint_pool.end()) return -1;
    // Compute-tile pools have one writer and one reader cursor each.
    cs.ports.push_back({fifo, produce, it->second, 0, 0});
    return static_cast<int>(cs.ports.size() - 1);
  }

  bool is_end(const std::string& fifo, bool produce) const {
    for (const auto& f : st.launch->fifos)
      if (f.name == fifo) {
        if (produce) return f.producer == cs.tile;
        return std::find(f.consumers.begin(), f.consumers.end(), cs.tile) != f.consumers.end();
      }
    return false;
  }

  Arg arg(const std::string& text) {
    Arg a;
    a.text = text;
    detail::ArgRef r = detail::parse_arg(text);
    a.index = r.index;
    if (is_end(r.name, false)) a.consume_port = port(r.name, false);
    if (is_end(r.name, true)) a.produce_port = port(r.name, true);
    if (a.consume_port < 0 && a.produce_port < 0) {
      a.buffer = true;
      a.address = st.layout->buffer_address.at({r.name, cs.tile});
      for (const auto& b : st.launch->buffers)
        if (b.name == r.name && b.tile == cs.tile) a.bytes = b.bytes;
    }
    return a;
  }

  void emit(const std::vector<CoreOp>& ops) {
    for (const auto& op : ops) {
      Instr in;
      in.count = op.count;
      switch (op.kind) {
        case CoreOp::Kind::loop: {
          size_t begin = cs.code.size();
          in.op = Instr::Op::loop_begin;
          cs.code.push_back(in);
          emit(op.body);
          Instr end;
          end.op = Instr::Op::loop_end;
          end.jump = begin;
          cs.code.push_back(end);
          cs.code[begin].jump = cs.code.size() - 1;
          continue;
        }
        case CoreOp::Kind::acquire:
        case CoreOp::Kind::release:
          in.op = op.kind == CoreOp::Kind::acquire ? Instr::Op::acquire : Instr::Op::release;
          in.port = port(op.fifo, op.port == CoreOp::Port::produce);
          break;
        case CoreOp::Kind::call:
          in.op = Instr::Op::call;
          in.kernel = &registry.get(op.kernel);
          in.params = &op.params;
          if (in.kernel->bind) in.bound = in.kernel->bind(op.params);
          for (const auto& a : op.args) in.args.push_back(arg(a));
          in.cycles = in.kernel->cycles ? in.kernel->cycles(op.params, *st.spec) : 0;
          in.macs = in.kernel->macs ? in.kernel->macs(op.params) : 0;
          break;
      }
      cs.code.push_back(std::move(in));
    }
  }
};

void call(LaunchState& st, CoreState& cs, const Instr& in) {
  std::vector<std::span<std::byte>> spans = std::move(cs.args);
  spans.clear();
  for (const Arg& a : in.args) {
    if (a.buffer) {
      spans.emplace_back(a.ptr, a.bytes);
      continue;
    }
    bool consume = a.consume_port >= 0 && cs.ports[a.consume_port].held > 0;
    const CorePort& p = cs.ports[consume ? a.consume_port : a.produce_port];
    if (a.index >= p.held)
      throw_error<SimulationError>("core {} call '{}': argument '{}' is not acquired ({} held): a race on silicon",
                                   to_string(cs.tile), in.kernel->name, a.text, p.held);
    const Pool& pool = st.pools[p.pool];
    int64_t n = (p.produce ? pool.written[p.cursor] : pool.read[p.cursor]) + a.index;
    // An aliased slot (Pool::may_alias) is only read: its kernel declared the
    // arg read-only, so the const host bytes are never written through it.
    std::byte* bytes = p.produce ? pool.slot(n) : const_cast<std::byte*>(pool.read_slot(n));
    spans.emplace_back(bytes, pool.slot_bytes);
  }
  Recorder::call(cs, in, spans);
  KernelInvocation inv{std::move(spans), in.params, in.bound.get()};
  try {
    in.kernel->run(inv);
  } catch (const DesignError& e) {
    throw_error<DesignError>("core {} call '{}': {}", to_string(cs.tile), in.kernel->name, e.what());
  }
  cs.args = std::move(inv.args);
  cs.stats.kernel_calls += 1;
  cs.stats.cycles += in.cycles;
  cs.stats.macs += in.macs;
}

}  // namespace

void compile_cores(LaunchState& st, const KernelRegistry& registry) {
  for (const auto& core : st.launch->cores) {
    CoreState cs;
    cs.tile = core.tile;
    Compiler{st, cs, registry}.emit(core.program);
    st.cores.push_back(std::move(cs));
  }
}

void bind_memory(LaunchState& st, std::map<TileCoord, std::vector<std::byte>>& mem) {
  // A reused state on the same thread finds the same memories: every pointer
  // below is a function of these bases, so it is bound already. (A GEMV's
  // cores hold a few hundred call args; binding them was 2 % of a decode.)
  std::vector<const std::byte*> bases;
  bases.reserve(mem.size());
  for (const auto& [t, bytes] : mem) bases.push_back(bytes.data());
  if (bases == st.bound_bases) return;
  st.bound_bases = std::move(bases);
  for (auto& p : st.pools) p.base = mem.at(p.tile).data() + p.address;
  for (auto& c : st.cores) {
    std::byte* base = nullptr;
    for (auto& in : c.code)
      for (auto& a : in.args)
        if (a.buffer) {
          if (base == nullptr) base = mem.at(c.tile).data();
          a.ptr = base + a.address;
        }
  }
}

bool run_core(LaunchState& st, CoreState& cs) {
  bool progress = false;
  while (cs.pc < cs.code.size()) {
    const Instr& in = cs.code[cs.pc];
    switch (in.op) {
      case Instr::Op::loop_begin:
        if (in.count == 0) {
          cs.pc = in.jump + 1;
          continue;
        }
        cs.loops.push_back(in.count);
        break;
      case Instr::Op::loop_end:
        if (--cs.loops.back() > 0) {
          cs.pc = in.jump + 1;
          progress = true;
          continue;
        }
        cs.loops.pop_back();
        break;
      case Instr::Op::acquire: {
        CorePort& p = cs.ports[in.port];
        const Pool& pool = st.pools[p.pool];
        bool ok = p.produce ? pool.written[p.cursor] + p.held + in.count <= pool.min_read() + pool.depth
                            : pool.read[p.cursor] + p.held + in.count <= pool.min_written();
        if (!ok) return progress;
        p.held += in.count;
        break;
      }
      case Instr::Op::release: {
        CorePort& p = cs.ports[in.port];
        if (p.held < in.count)
          throw_error<SimulationError>("core {} releases {} objects of fifo '{}' but holds {}", to_string(cs.tile),
                                       in.count, p.fifo, p.held);
        Pool& pool = st.pools[p.pool];
        (p.produce ? pool.written : pool.read)[p.cursor] += in.count;
        p.held -= in.count;
        break;
      }
      case Instr::Op::call:
        call(st, cs, in);
        break;
    }
    ++cs.pc;
    progress = true;
  }
  cs.done = true;
  return progress;
}

std::string describe_blocked(const LaunchState& st, const CoreState& cs) {
  const Instr& in = cs.code.at(cs.pc);
  const CorePort& p = cs.ports.at(in.port);
  const Pool& pool = st.pools[p.pool];
  int64_t avail = p.produce ? pool.min_read() + pool.depth - pool.written[p.cursor] - p.held
                            : pool.min_written() - pool.read[p.cursor] - p.held;
  return fmt::format("core {} blocked at acquire {} '{}' x{} (holds {}; {} {} in pool '{}' of depth {})",
                     to_string(cs.tile), p.produce ? "produce" : "consume", p.fifo, in.count, p.held, avail,
                     p.produce ? "free slot(s)" : "object(s) ready", pool.name, pool.depth);
}

}  // namespace tessera::npu::sim
