#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/model/safetensors.h"
#include "tessera/model/safetensors_stream.h"

namespace tessera::model {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

// The header JSON (unpadded).
std::string header_json(const std::vector<SafetensorsWriteEntry>& entries,
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
  return h.dump();
}

std::string header_text(const std::vector<SafetensorsWriteEntry>& entries,
                        const std::map<std::string, std::string>& metadata) {
  std::string text = header_json(entries, metadata);
  // Spaces keep the data section 8-byte aligned and the JSON unchanged.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void put_bytes(std::FILE* f, const void* p, size_t n, const std::filesystem::path& file) {
  if (n && std::fwrite(p, 1, n, f) != n)
    throw_error<FileError>("{}: write failed: {}", file.string(), std::strerror(errno));
}

void put_length(std::FILE* f, uint64_t n, const std::filesystem::path& file) {
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  put_bytes(f, len, 8, file);
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
  auto put = [&](const void* p, size_t n) { put_bytes(f.get(), p, n, tmp); };
  put_length(f.get(), text.size(), tmp);
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

void SafetensorsStreamWriter::Closer::operator()(std::FILE* f) const {
  if (f) std::fclose(f);
}

SafetensorsStreamWriter::SafetensorsStreamWriter(std::filesystem::path out, uint64_t header_reserve)
    : out_(std::move(out)), reserve_((header_reserve + 7) / 8 * 8) {
  tmp_ = out_;
  tmp_ += ".tmp";
  file_.reset(std::fopen(tmp_.c_str(), "wb"));
  if (!file_) throw_error<FileError>("{}: cannot create: {}", tmp_.string(), std::strerror(errno));
  // Room for the length and the header, filled in by finish().
  if (std::fseek(file_.get(), static_cast<long>(8 + reserve_), SEEK_SET) != 0)
    throw_error<FileError>("{}: seek failed: {}", tmp_.string(), std::strerror(errno));
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (!file_) return;
  file_.reset();
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);  // an unfinished file must not look complete
}

void SafetensorsStreamWriter::add(const std::string& name, DType dtype, const Shape& shape,
                                  std::span<const std::byte> data) {
  TESSERA_CHECK(file_ != nullptr, "safetensors stream {}: add after finish", out_.string());
  const uint64_t n = static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype);
  if (n != data.size())
    throw_error<SafetensorsError>("{}: tensor '{}' has shape {} ({} bytes) but {} bytes of data",
                                  out_.string(), name, shape_str(shape), n, data.size());
  entries_.push_back({name, dtype, shape});
  put_bytes(file_.get(), data.data(), data.size(), tmp_);
  offset_ += n;
}

void SafetensorsStreamWriter::finish(const std::map<std::string, std::string>& metadata) {
  TESSERA_CHECK(file_ != nullptr, "safetensors stream {}: finished twice", out_.string());
  std::string text = header_json(entries_, metadata);  // throws on a duplicate name
  if (text.size() > reserve_)
    throw_error<SafetensorsError>("{}: header of {} bytes outgrew the {} bytes reserved for it",
                                  out_.string(), text.size(), reserve_);
  text.append(reserve_ - text.size(), ' ');
  if (std::fseek(file_.get(), 0, SEEK_SET) != 0)
    throw_error<FileError>("{}: seek failed: {}", tmp_.string(), std::strerror(errno));
  put_length(file_.get(), text.size(), tmp_);
  put_bytes(file_.get(), text.data(), text.size(), tmp_);
  if (std::fclose(file_.release()) != 0)
    throw_error<FileError>("{}: close failed: {}", tmp_.string(), std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(tmp_, out_, ec);
  if (ec) throw_error<FileError>("{}: cannot rename to {}: {}", tmp_.string(), out_.string(), ec.message());
}

}  // namespace tessera::model
