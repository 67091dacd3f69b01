#pragma once
// Internal: the context and the rule functions shared by validator*.cpp.
#include <string>

#include <fmt/format.h>

#include "tessera/npu/validator.h"

namespace tessera::npu::detail {

struct Ctx {
  const Design& design;
  const Launch& launch;
  const DeviceSpec& spec;
  const KernelRegistry& registry;

  const Fifo* fifo(const std::string& name) const;
  const HostBuffer* host(const std::string& name) const;
  TileKind kind(TileCoord t) const { return spec.kind_of_row(t.row); }
  bool on_grid(TileCoord t) const;
  bool is_consumer(const Fifo& f, TileCoord t) const;
  // "launch 'x'" prefix of every message.
  std::string at() const;
};

// Where a check is, for its error message: formatted only when one is thrown
// (a decode position's new designs are validated by their builder and again
// by Simulator::prepare, and the messages formatted up front were a sixth of
// that). Does not own the callable: bind it to a named lambda, or pass one as
// an argument (it lives to the end of the call).
class Where {
 public:
  template <class F>
  Where(const F& f) : obj_(&f), call_([](const void* o) { return std::string((*static_cast<const F*>(o))()); }) {}
  std::string str() const { return call_(obj_); }

 private:
  const void* obj_;
  std::string (*call_)(const void*);
};

// Bytes one object transfer puts on the stream through `p` over an object of
// `object_bytes` (contiguous = the whole object), repeats included.
int64_t stream_bytes(const AccessPattern& p, int64_t object_bytes, int elem_bytes);
// The stream length of one object of `f` at its non-shim ends (they must agree).
int64_t fifo_chunk_bytes(const Fifo& f, const DeviceSpec& spec);

// A call arg: "fifo" or "fifo[i]" (index 0 when absent); index -1 when the
// brackets are malformed.
struct ArgRef {
  std::string name;
  int64_t index = 0;
};
ArgRef parse_arg(const std::string& arg);

// Access pattern over `region_elems` elements, issued by a DMA of `accessor`.
void check_pattern(const Ctx& c, const AccessPattern& p, int64_t region_elems, int elem_bytes, TileKind accessor,
                   const Where& what);

void check_fifo_patterns(const Ctx& c);
void check_core_programs(const Ctx& c);
void check_compute_endpoints_used(const Ctx& c);
void check_sequence(const Ctx& c);

}  // namespace tessera::npu::detail

template <>
struct fmt::formatter<tessera::npu::detail::Where> : fmt::formatter<std::string> {
  auto format(const tessera::npu::detail::Where& w, format_context& ctx) const {
    return fmt::formatter<std::string>::format(w.str(), ctx);
  }
};
