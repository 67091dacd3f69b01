// manifest.json: sha256 of artifacts and inputs per phase (manifest.h).
#include "tessera/pipeline/manifest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/core/threads.h"

namespace tessera::pipeline {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "tessera-deploy-manifest";
// 2: verdict chain (inputs hash earlier artifacts) and seal; 3: big files
// digested as a tree of chunks (sha256_file)
constexpr int kVersion = 3;

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

namespace {

// A big file's digest, remembered for this process while the file is the
// same inode with the same size and the same modification and change times
// (ns): a deploy checks its 1.5 GB packed weights against the manifest in
// every phase, and hashing them again was a quarter of a 2-layer
// llama-3.2-1b deploy. Any write moves ctime, which user space cannot set,
// but only to the kernel's coarse clock (a tick of 1-10 ms): a file changed
// within the last second is not remembered, so any later write lands in
// another tick and so moves ctime. Small files are always rehashed.
constexpr off_t kMemoMinBytes = off_t{16} << 20;
// A file of 1 GiB or more is digested as a tree (manifest.h, sha256_file):
// one sha256 per 64 MiB chunk, computed on every core, then one over them.
constexpr uintmax_t kTreeMinBytes = uintmax_t{1} << 30;
constexpr uint64_t kTreeChunkBytes = uint64_t{64} << 20;
constexpr const char* kTreePrefix = "sha256-64m:";
constexpr int64_t kSettledNs = 1'000'000'000;

struct FileState {
  dev_t dev;
  ino_t ino;
  off_t size;
  int64_t mtime_ns, ctime_ns;
  auto operator<=>(const FileState&) const = default;
};

std::optional<FileState> state_of(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < kMemoMinBytes) return std::nullopt;
  auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; };
  timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  if (ns(now) - ns(st.st_ctim) < kSettledNs) return std::nullopt;
  return FileState{st.st_dev, st.st_ino, st.st_size, ns(st.st_mtim), ns(st.st_ctim)};
}

std::mutex digest_mu;
std::map<FileState, std::string>& digests() {
  static std::map<FileState, std::string> m;
  return m;
}

std::string sha256_of_stream(const fs::path& file);

}  // namespace

std::string sha256_file(const fs::path& file) {
  const std::optional<FileState> before = state_of(file);
  if (before) {
    std::lock_guard lock(digest_mu);
    if (auto it = digests().find(*before); it != digests().end()) return it->second;
  }
  std::string digest = sha256_of_stream(file);
  // Kept only if nothing moved while it was read.
  if (before && state_of(file) == before) {
    std::lock_guard lock(digest_mu);
    digests().emplace(*before, digest);
  }
  return digest;
}

namespace {

// sha256 of bytes [offset, offset + length) of the file (length -1: to its end).
std::string sha256_of_range(const fs::path& file, uint64_t offset, int64_t length) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_error<FileError>("cannot read {} to hash it", file.string());
  if (offset > 0) in.seekg(static_cast<std::streamoff>(offset));
  MdCtx ctx = sha256_begin();
  std::vector<char> buf(1 << 20);
  uint64_t left = length < 0 ? UINT64_MAX : static_cast<uint64_t>(length);
  while (in && left > 0) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min<uint64_t>(buf.size(), left)));
    const auto got = static_cast<uint64_t>(in.gcount());
    if (got > 0) sha256_update(ctx.get(), buf.data(), got);
    left -= got;
  }
  if (in.bad() || (length >= 0 && left > 0))
    throw_error<FileError>("read error while hashing {}", file.string());
  return sha256_end(ctx.get());
}

std::string sha256_of_stream(const fs::path& file) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  if (ec || size < kTreeMinBytes) return sha256_of_range(file, 0, -1);
  return kTreePrefix + sha256_tree(file, kTreeChunkBytes);
}

}  // namespace

std::string sha256_tree(const fs::path& file, uint64_t chunk_bytes) {
  TESSERA_CHECK(chunk_bytes > 0, "sha256_tree of {} with chunks of 0 bytes", file.string());
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  if (ec) throw_error<FileError>("cannot read {} to hash it: {}", file.string(), ec.message());
  const uint64_t chunks = std::max<uint64_t>(1, (size + chunk_bytes - 1) / chunk_bytes);
  std::vector<std::string> digests(chunks);
  parallel_for(chunks, [&](size_t c0, size_t c1) {
    for (size_t c = c0; c < c1; ++c) {
      const uint64_t offset = c * chunk_bytes;
      digests[c] = sha256_of_range(file, offset, static_cast<int64_t>(std::min<uint64_t>(chunk_bytes, size - offset)));
    }
  });
  std::string lines;
  for (const std::string& d : digests) lines += d + "\n";
  return sha256_text(lines);
}

std::string sha256_bytes(std::span<const std::byte> data) {
  MdCtx ctx = sha256_begin();
  sha256_update(ctx.get(), data.data(), data.size());
  return sha256_end(ctx.get());
}

std::string sha256_text(const std::string& text) {
  return sha256_bytes(std::as_bytes(std::span(text.data(), text.size())));
}

namespace {

// The manifest without its seal: what the seal hashes.
nlohmann::json body(const Manifest& m) {
  nlohmann::json arts = nlohmann::json::object(), phs = nlohmann::json::object();
  for (const auto& [rel, a] : m.artifacts) arts[rel] = {{"sha256", a.sha256}, {"phase", a.phase}};
  for (const auto& [p, ph] : m.phases) phs[std::to_string(p)] = {{"status", ph.status}, {"inputs", ph.inputs}};
  return {{"format", kFormat}, {"version", kVersion}, {"artifacts", arts}, {"phases", phs}};
}

}  // namespace

std::string Manifest::seal() const { return sha256_text(body(*this).dump()); }

Manifest Manifest::load(const fs::path& dir, std::string* problem) {
  Manifest m;
  const fs::path file = dir / "manifest.json";
  if (!fs::exists(file)) return m;
  try {
    std::ifstream in(file);
    const auto j = nlohmann::json::parse(in);
    if (j.at("format").get<std::string>() != kFormat)
      throw std::runtime_error("format is not " + std::string(kFormat));
    if (j.at("version").get<int>() != kVersion)
      throw std::runtime_error(fmt::format("version {} is not {}: written by another tessera", j.at("version").dump(), kVersion));
    for (const auto& [rel, a] : j.at("artifacts").items())
      m.artifacts[rel] = {a.at("sha256").get<std::string>(), a.at("phase").get<int>()};
    for (const auto& [p, ph] : j.at("phases").items())
      m.phases[std::stoi(p)] = {ph.at("status").get<std::string>(),
                                ph.at("inputs").get<std::map<std::string, std::string>>()};
    if (j.at("seal").get<std::string>() != m.seal())
      throw std::runtime_error("its seal does not match its content (edited by hand?)");
  } catch (const std::exception& e) {
    // A manifest we cannot read vouches for nothing: every phase is redone.
    if (problem) *problem = fmt::format("manifest.json is not trusted ({}): a deploy redoes every phase", e.what());
    return Manifest{};
  }
  return m;
}

void Manifest::save(const fs::path& dir) const {
  nlohmann::json j = body(*this);
  j["seal"] = seal();
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
  return it != artifacts.end() && plain_hasher(dir)(rel) == it->second.sha256;
}

FileHasher plain_hasher(const fs::path& dir) {
  return [dir](const std::string& rel) {
    return fs::is_regular_file(dir / rel) ? sha256_file(dir / rel) : std::string("missing");
  };
}

std::vector<std::string> Manifest::stale(const fs::path& dir, int phase) const {
  return stale(plain_hasher(dir), phase);
}

std::vector<std::string> Manifest::stale(const FileHasher& sha, int phase) const {
  std::vector<std::string> out;
  for (const auto& [rel, a] : artifacts) {
    if (a.phase != phase) continue;
    const std::string now = sha(rel);
    if (now == "missing")
      out.push_back(rel + ": missing");
    else if (now != a.sha256)
      out.push_back(rel + ": sha256 mismatch (edited or truncated)");
  }
  return out;
}

void Manifest::drop_phase(int phase) {
  phases.erase(phase);
  std::erase_if(artifacts, [phase](const auto& kv) { return kv.second.phase == phase; });
}

std::map<std::string, std::string> earlier_artifacts(const FileHasher& sha, const Manifest& m, int phase) {
  std::map<std::string, std::string> out;
  for (const auto& [rel, a] : m.artifacts)
    if (a.phase < phase) out[rel] = sha(rel);
  return out;
}

namespace {

// One phase's verdict against the files now and phase 0's options and source.
void check_phase(int p, const ManifestPhase& ph, const Manifest& m, const FileHasher& sha,
                 std::vector<std::string>& problems) {
  if (ph.status != "passed") {
    problems.push_back(ph.status == "running"
                           ? fmt::format("phase {} was interrupted (status 'running')", p)
                           : fmt::format("phase {} has status '{}'", p, ph.status));
    return;
  }
  for (const std::string& s : m.stale(sha, p)) problems.push_back(fmt::format("phase {} artifact {}", p, s));
  const auto& first = m.phases.begin()->second.inputs;
  for (const auto& [name, h] : ph.inputs) {
    if (name == "planted_bug") {
      problems.push_back(fmt::format("phase {} was judged with a planted bug (deploy --plant-bug)", p));
      continue;
    }
    if (name == "options" || name == "source") {
      auto it = first.find(name);
      // A preset's phase 0 has no source input (it writes the source).
      if (it != first.end() && it->second != h)
        problems.push_back(fmt::format("phase {} was judged on other {} than phase {}", p, name,
                                       m.phases.begin()->first));
      continue;
    }
    auto a = m.artifacts.find(name);
    if (a == m.artifacts.end() || a->second.phase >= p)
      problems.push_back(fmt::format("phase {} read {}, which no earlier phase wrote", p, name));
    else if (sha(name) != h)
      problems.push_back(fmt::format("phase {} was judged on another {} than the one on disk", p, name));
  }
  for (const auto& [rel, a] : earlier_artifacts(sha, m, p))
    if (!ph.inputs.count(rel))
      problems.push_back(fmt::format("phase {} has no record of reading {}", p, rel));
}

}  // namespace

std::vector<std::string> check_deployment(const fs::path& dir, const Manifest& m,
                                          const std::vector<std::string>& required) {
  std::vector<std::string> problems;
  std::map<std::string, std::string> memo;
  const FileHasher plain = plain_hasher(dir);
  const FileHasher sha = [&](const std::string& rel) {
    auto it = memo.find(rel);
    return it != memo.end() ? it->second : (memo[rel] = plain(rel));
  };
  if (m.phases.empty() || m.phases.begin()->first != 0) problems.push_back("phase 0 (oracle) has no verdict");
  for (const auto& [p, ph] : m.phases) check_phase(p, ph, m, sha, problems);
  for (const std::string& f : required)
    if (!m.artifacts.count(f)) problems.push_back(fmt::format("{} is not an artifact of any phase", f));
  return problems;
}

DirLock::DirLock(const fs::path& dir, Mode mode, const std::string& who) {
  const fs::path file = dir / ".tessera.lock";
  const bool excl = mode == Mode::exclusive;
  fd_ = ::open(file.c_str(), excl ? (O_RDWR | O_CREAT | O_CLOEXEC) : (O_RDONLY | O_CLOEXEC), 0644);
  if (fd_ < 0) {
    // No lock file: no deploy has ever written here, so none is writing now.
    if (!excl && errno == ENOENT) return;
    throw_error<FileError>("{}: cannot open {}: {}", who, file.string(), std::strerror(errno));
  }
  if (::flock(fd_, (excl ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw_error<UsageError>("{}: {} is being written by another tessera deploy; wait for it to finish or "
                              "use another directory", who, dir.string());
    throw_error<FileError>("{}: cannot lock {}: {}", who, file.string(), std::strerror(err));
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace tessera::pipeline
