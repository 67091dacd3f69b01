#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/safetensors.h"

namespace tessera::model {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

std::string header_text(const std::vector<SafetensorsWriteEntry>& entries,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& e : entries) {
    uint64_t n = static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype);
    if (h.contains(e.name) || e.name == "__metadata__")
      throw_error<SafetensorsError>("cannot write tensor '{}' twice", e.name);
    h[e.name] = {{"dtype", std::string(dtype_name(e.dtype))},
                 {"shape", e.shape},
                 {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = h.dump();
  // Spaces keep the data section 8-byte aligned and the JSON unchanged.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

void write_safetensors(const std::filesystem::path& out,
                       const std::vector<SafetensorsWriteEntry>& entries,
                       const SafetensorsFill& fill,
                       const std::map<std::string, std::string>& metadata) {
  const std::string text = header_text(entries, metadata);
  auto tmp = out;
  tmp += ".tmp";
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (!f) throw_error<FileError>("{}: cannot create: {}", tmp.string(), std::strerror(errno));
  auto put = [&](const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f.get()) != n)
      throw_error<FileError>("{}: write failed: {}", tmp.string(), std::strerror(errno));
  };
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  put(len, 8);
  put(text.data(), text.size());
  constexpr uint64_t kChunk = 8u << 20;  // bounded memory for multi-GB files
  std::vector<std::byte> buf;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    uint64_t n = static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype);
    for (uint64_t off = 0; off < n; off += kChunk) {
      buf.assign(std::min(kChunk, n - off), std::byte{0});
      fill(i, off, buf);
      put(buf.data(), buf.size());
    }
  }
  if (std::fclose(f.release()) != 0)
    throw_error<FileError>("{}: close failed: {}", tmp.string(), std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) throw_error<FileError>("{}: cannot rename to {}: {}", tmp.string(), out.string(),
                                 ec.message());
}

void write_safetensors(const std::filesystem::path& out,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriteEntry> entries;
  for (const auto& [name, t] : tensors) entries.push_back({name, t.dtype(), t.shape()});
  write_safetensors(
      out, entries,
      [&](size_t i, uint64_t off, std::span<std::byte> dst) {
        std::memcpy(dst.data(), tensors[i].second.bytes() + off, dst.size());
      },
      metadata);
}

}  // namespace tessera::model
