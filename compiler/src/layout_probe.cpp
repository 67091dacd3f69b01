// Layout probes (layout_probe.h). The output probe inverts unpack(): every
// bf16 slot of the design's output buffers is filled with one base-256 digit
// of its own index (as the bf16-exact integer digit + 1), unpack() tells
// which slot each logical element was read from, and the probe tensor is then
// written to exactly those slots - the bytes a consumer whose pack() writes
// the same would read.
#include "layout_probe.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "tessera/core/bf16.h"
#include "tessera/core/error.h"
#include "tessera/kernels/builders/builder_support.h"

namespace tessera::compiler::detail {

namespace {

// FNV-1a, 64-bit, over 8-byte little-endian words (bytes one by one for a
// tail): the embedding-table probe is hundreds of MB, and a word per multiply
// keeps hashing it well under a second. Folded to 32 bits for the key.
//
// A zero word only multiplies by the prime ((h ^ 0) * prime), so a run of k
// zero words is one multiply by prime^k: the same digest. A decode position's
// probes hash its resident cache, a few rows in thousands of zero rows, and
// the word-serial chain was a fifth of its retarget.
class Fnv1a {
 public:
  void bytes(const std::byte* p, size_t n) {
    size_t i = 0;
    while (i + 8 <= n) {
      const size_t zeros = zero_words(p + i, (n - i) / 8);
      if (zeros > 0) {
        h_ *= power(zeros);
        i += zeros * 8;
        continue;
      }
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
      i += 8;
    }
    for (; i < n; ++i) mix(static_cast<uint64_t>(p[i]));
  }
  void text(std::string_view s) { bytes(reinterpret_cast<const std::byte*>(s.data()), s.size()); }
  void number(uint64_t v) { mix(v); }
  uint32_t digest() const { return static_cast<uint32_t>(h_ ^ (h_ >> 32)); }

 private:
  static constexpr uint64_t kPrime = 0x100000001b3ull;
  void mix(uint64_t w) {
    h_ ^= w;
    h_ *= kPrime;
  }
  // The leading zero words of p[0..words), 8 at a time where it can.
  static size_t zero_words(const std::byte* p, size_t words) {
    size_t k = 0;
    for (; k + 8 <= words; k += 8) {
      uint64_t w[8], any = 0;
      std::memcpy(w, p + k * 8, sizeof w);
      for (uint64_t v : w) any |= v;
      if (any != 0) break;
    }
    for (; k < words; ++k) {
      uint64_t w;
      std::memcpy(&w, p + k * 8, 8);
      if (w != 0) break;
    }
    return k;
  }
  static uint64_t power(size_t k) {  // kPrime^k mod 2^64
    uint64_t r = 1, b = kPrime;
    for (; k > 0; k >>= 1, b *= b)
      if (k & 1) r *= b;
    return r;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// bf16-exact ramp (|v| <= 125/64 needs 7 significand bits): packing cannot
// round two layouts differently, and distinct positions mostly differ.
// Written a period at a time, each byte once: a probe of llama's 128256 x
// 2048 LM head is 262 M values, and a modulo per value and a zero fill before
// it were a tenth of `tessera run`'s start.
std::vector<float> periodic(int64_t n, const std::vector<float>& period) {
  std::vector<float> v;
  v.reserve(static_cast<size_t>(n));
  const auto p = static_cast<int64_t>(period.size());
  for (int64_t done = 0; done < n; done += p)
    v.insert(v.end(), period.begin(), period.begin() + std::min(p, n - done));
  return v;
}

std::vector<float> weight_probe(int64_t n) {
  static const std::vector<float> period = [] {
    std::vector<float> v(251);
    for (int64_t i = 0; i < 251; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i - 125) / 64.f;
    return v;
  }();
  return periodic(n, period);
}

// The same without zeros: a zero in the probe would look like padding.
float act_probe(int64_t i) {
  const int64_t r = i % 250;
  return static_cast<float>(r < 125 ? r - 125 : r - 124) / 64.f;
}

std::vector<float> act_probe_values(int64_t n) {
  static const std::vector<float> period = [] {
    std::vector<float> v(250);
    for (int64_t i = 0; i < 250; ++i) v[static_cast<size_t>(i)] = act_probe(i);
    return v;
  }();
  return periodic(n, period);
}

ProbeResult hash_memory(const npu::HostMemory& host, bool names) {
  Fnv1a h;
  ProbeResult p;
  for (const auto& [name, buf] : host) {  // std::map: name order, stable
    if (names) h.text(name);
    h.number(buf.size());
    h.bytes(buf.data(), buf.size());
    p.bytes += static_cast<int64_t>(buf.size());
    p.buffers.push_back(name);
  }
  p.hash = h.digest();
  return p;
}

ProbeResult pack_probe(const kernels::BuiltOp& op, size_t input, bool names, bool nonzero) {
  TESSERA_CHECK(input < op.inputs.size(), "{}: input {} of {}", op.shape.key(), input,
                op.inputs.size());
  const int64_t n = shape_numel(op.inputs[input].shape);
  const std::vector<float> values = nonzero ? act_probe_values(n) : weight_probe(n);
  npu::HostMemory host;
  op.pack(input, values, host);
  return hash_memory(host, names);
}

void put_bf16(std::vector<std::byte>& buf, int64_t slot, float v) {
  const uint16_t b = f32_to_bf16(v).bits;
  std::memcpy(buf.data() + slot * 2, &b, 2);
}

// std::fill_n of 16-bit slots compiles to a store per slot here (GCC 12,
// -O2): a run is filled by doubling a filled prefix with memcpy instead.
void fill16(uint16_t* dst, int64_t n, uint16_t v) {
  const int64_t head = std::min<int64_t>(n, 32);
  for (int64_t i = 0; i < head; ++i) dst[i] = v;
  for (int64_t done = head; done < n;) {
    const int64_t c = std::min(done, n - done);
    std::memcpy(dst + done, dst, static_cast<size_t>(c) * 2);
    done += c;
  }
}

// Slot e of `buf` (global slot s0 + e) gets the bf16 bits of digit + 1
// (1..256, all bf16-exact, from a table rather than converted per slot),
// digit = ((s0 + e) >> shift) & 255: for shift 0 a 256-slot period, copied a
// period at a time; above it runs of 2^shift equal slots, filled a run at a
// time (a decode token probes the new attention and kv_append designs, whose
// resident caches hold ~10^6 slots: three digits).
void fill_digit(std::vector<std::byte>& buf, int64_t s0, int shift) {
  static const std::array<uint16_t, 512> bits = [] {
    std::array<uint16_t, 512> b{};
    for (int d = 0; d < 512; ++d) b[static_cast<size_t>(d)] = f32_to_bf16(static_cast<float>(d % 256 + 1)).bits;
    return b;
  }();
  auto* dst = reinterpret_cast<uint16_t*>(buf.data());
  const auto count = static_cast<int64_t>(buf.size() / 2);
  for (int64_t e = 0; e < count;) {
    const int64_t s = s0 + e;
    if (shift == 0) {
      const int64_t len = std::min<int64_t>(256, count - e);
      std::copy_n(bits.begin() + (s & 255), len, dst + e);
      e += len;
      continue;
    }
    const int64_t run = (int64_t{1} << shift) - (s & ((int64_t{1} << shift) - 1));
    const int64_t len = std::min(run, count - e);
    fill16(dst + e, len, bits[static_cast<size_t>((s >> shift) & 255)]);
    e += len;
  }
}

}  // namespace

ProbeResult probe_weight(const kernels::BuiltOp& op, size_t input) {
  return pack_probe(op, input, true, false);
}

ProbeResult probe_input(const kernels::BuiltOp& op, size_t input) {
  return pack_probe(op, input, false, true);
}

ProbeResult probe_output(const kernels::BuiltOp& op, size_t output) {
  TESSERA_CHECK(output < op.outputs.size(), "{}: output {} of {}", op.shape.key(), output,
                op.outputs.size());
  // The host buffers the design writes (from-device DMA tasks), name order.
  std::map<std::string, int64_t> written;
  std::set<std::string> read_back;
  ProbeResult opaque;
  opaque.opaque = true;
  for (const npu::Launch& l : op.design.launches)
    for (const npu::DmaTask& t : l.sequence) {
      if (t.to_device) read_back.insert(t.host_buffer);
      else written[t.host_buffer] = 0;
    }
  for (const npu::HostBuffer& h : op.design.host_buffers) {
    if (!written.count(h.name)) continue;
    // An f32 buffer a later launch reads back (attention_decode's partial
    // softmax states) is the design's DDR scratch, not where the output lies.
    if (h.elem_bytes != 2 && read_back.count(h.name)) {
      written.erase(h.name);
      continue;
    }
    if (h.elem_bytes != 2) return opaque;  // ids, f32 tables: not a bf16 gather
    written[h.name] = h.bytes;
  }
  // Slot s of the concatenated buffers (name order) -> buffer and element.
  std::vector<std::pair<std::string, int64_t>> bufs(written.begin(), written.end());
  int64_t slots = 0;
  for (const auto& [name, bytes] : bufs) slots += bytes / 2;
  const int64_t n = shape_numel(op.outputs[output].shape);
  std::vector<int64_t> pos(static_cast<size_t>(n), 0);
  int64_t scale = 1;
  // One set of buffers for every digit (each pass fills every slot), reused
  // for the image after: a decode position's kv_append probes its resident
  // cache, about 1.5 MB per buffer, whose fresh pages cost more than the
  // fills themselves.
  npu::HostMemory host;
  for (int digit = 0, shift = 0; scale < slots || digit == 0; ++digit, scale *= 256, shift += 8) {
    int64_t s = 0;
    for (const auto& [name, bytes] : bufs) {
      auto& buf = host[name];
      buf.resize(static_cast<size_t>(bytes));
      fill_digit(buf, s, shift);
      s += bytes / 2;
    }
    const std::vector<float> got = op.unpack(output, host);
    if (static_cast<int64_t>(got.size()) != n) return opaque;
    for (int64_t j = 0; j < n; ++j) {
      const float d = got[j] - 1;
      if (!(d >= 0 && d < 256) || d != static_cast<float>(static_cast<int64_t>(d))) return opaque;
      pos[j] += static_cast<int64_t>(d) * scale;
    }
  }
  npu::HostMemory image;
  for (const auto& [name, bytes] : bufs) {
    std::vector<std::byte>& b = image[name] = std::move(host[name]);
    b.assign(static_cast<size_t>(bytes), std::byte{0});
  }
  std::vector<std::pair<int64_t, std::vector<std::byte>*>> starts;  // first slot of each buffer
  int64_t s0 = 0;
  for (const auto& [name, bytes] : bufs) {
    starts.emplace_back(s0, &image[name]);
    s0 += bytes / 2;
  }
  for (int64_t j = 0; j < n; ++j) {
    if (pos[j] >= slots) return opaque;
    size_t b = starts.size() - 1;
    while (starts[b].first > pos[j]) --b;
    put_bf16(*starts[b].second, pos[j] - starts[b].first, act_probe(j));
  }
  return hash_memory(image, false);
}

std::string activation_key(const ProbeResult& p) {
  return p.opaque ? std::string("a:opaque") : fmt::format("a:{:08x}", p.hash);
}

}  // namespace tessera::compiler::detail
