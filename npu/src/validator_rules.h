#pragma once
// Internal: the context and the rule functions shared by validator*.cpp.
#include <string>

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
                   const std::string& what);

void check_fifo_patterns(const Ctx& c);
void check_core_programs(const Ctx& c);
void check_compute_endpoints_used(const Ctx& c);
void check_sequence(const Ctx& c);

}  // namespace tessera::npu::detail
