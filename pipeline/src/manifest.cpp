// manifest.json: sha256 of artifacts and inputs per phase (manifest.h).
#include "tessera/pipeline/manifest.h"

#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"

namespace tessera::pipeline {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "tessera-deploy-manifest";

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

MdCtx sha256_begin() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw_error<InternalError>("sha256: OpenSSL EVP initialisation failed");
  return ctx;
}

void sha256_update(EVP_MD_CTX* ctx, const void* data, size_t n) {
  if (EVP_DigestUpdate(ctx, data, n) != 1) throw_error<InternalError>("sha256: EVP_DigestUpdate failed");
}

std::string sha256_end(EVP_MD_CTX* ctx) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, md.data(), &len) != 1)
    throw_error<InternalError>("sha256: EVP_DigestFinal_ex failed");
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

}  // namespace

std::string sha256_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_error<FileError>("cannot read {} to hash it", file.string());
  MdCtx ctx = sha256_begin();
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) sha256_update(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw_error<FileError>("read error while hashing {}", file.string());
  return sha256_end(ctx.get());
}

std::string sha256_bytes(std::span<const std::byte> data) {
  MdCtx ctx = sha256_begin();
  sha256_update(ctx.get(), data.data(), data.size());
  return sha256_end(ctx.get());
}

std::string sha256_text(const std::string& text) {
  return sha256_bytes(std::as_bytes(std::span(text.data(), text.size())));
}

Manifest Manifest::load(const fs::path& dir, std::string* problem) {
  Manifest m;
  const fs::path file = dir / "manifest.json";
  if (!fs::exists(file)) return m;
  try {
    std::ifstream in(file);
    const auto j = nlohmann::json::parse(in);
    if (j.at("format").get<std::string>() != kFormat)
      throw std::runtime_error("format is not " + std::string(kFormat));
    for (const auto& [rel, a] : j.at("artifacts").items())
      m.artifacts[rel] = {a.at("sha256").get<std::string>(), a.at("phase").get<int>()};
    for (const auto& [p, ph] : j.at("phases").items())
      m.phases[std::stoi(p)] = {ph.at("status").get<std::string>(),
                                ph.at("inputs").get<std::map<std::string, std::string>>()};
  } catch (const std::exception& e) {
    // A manifest we cannot read vouches for nothing: every phase is redone.
    if (problem) *problem = fmt::format("manifest.json is unreadable ({}): every phase is redone", e.what());
    return Manifest{};
  }
  return m;
}

void Manifest::save(const fs::path& dir) const {
  nlohmann::json arts = nlohmann::json::object(), phs = nlohmann::json::object();
  for (const auto& [rel, a] : artifacts) arts[rel] = {{"sha256", a.sha256}, {"phase", a.phase}};
  for (const auto& [p, ph] : phases) phs[std::to_string(p)] = {{"status", ph.status}, {"inputs", ph.inputs}};
  const nlohmann::json j = {{"format", kFormat}, {"version", 1}, {"artifacts", arts}, {"phases", phs}};
  const fs::path tmp = dir / "manifest.json.tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw_error<FileError>("cannot write {}", tmp.string());
    out << j.dump(2) << "\n";
    if (!out) throw_error<FileError>("write error on {}", tmp.string());
  }
  fs::rename(tmp, dir / "manifest.json");
}

void Manifest::record(const fs::path& dir, const std::string& rel, int phase) {
  artifacts[rel] = {sha256_file(dir / rel), phase};
}

bool Manifest::artifact_matches(const fs::path& dir, const std::string& rel) const {
  auto it = artifacts.find(rel);
  return it != artifacts.end() && fs::is_regular_file(dir / rel) && sha256_file(dir / rel) == it->second.sha256;
}

std::vector<std::string> Manifest::stale(const fs::path& dir, int phase) const {
  std::vector<std::string> out;
  for (const auto& [rel, a] : artifacts) {
    if (a.phase != phase) continue;
    if (!fs::is_regular_file(dir / rel))
      out.push_back(rel + ": missing");
    else if (sha256_file(dir / rel) != a.sha256)
      out.push_back(rel + ": sha256 mismatch (edited or truncated)");
  }
  return out;
}

void Manifest::drop_phase(int phase) {
  phases.erase(phase);
  std::erase_if(artifacts, [phase](const auto& kv) { return kv.second.phase == phase; });
}

}  // namespace tessera::pipeline
