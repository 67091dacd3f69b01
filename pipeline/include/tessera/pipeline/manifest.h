#pragma once
// manifest.json of a deployment directory (deploy.h): what each phase wrote,
// with the sha256 of every artifact, and what each phase read (its inputs'
// sha256), so that a rerun can tell a trustworthy passed phase from one whose
// files were edited, truncated, or computed from different inputs.
//
//   {"format": "tessera-deploy-manifest", "version": 1,
//    "artifacts": {"phase2.json": {"sha256": "...", "phase": 2}, ...},
//    "phases": {"2": {"status": "passed", "inputs": {"weights.safetensors": "..."}}}}
#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tessera::pipeline {

// Lowercase hex sha256 (OpenSSL EVP). FileError naming the path when it cannot be read.
std::string sha256_file(const std::filesystem::path& file);
std::string sha256_bytes(std::span<const std::byte> data);
std::string sha256_text(const std::string& text);

struct ManifestArtifact {
  std::string sha256;
  int phase = 0;
};

struct ManifestPhase {
  std::string status;                         // "passed" | "failed"
  std::map<std::string, std::string> inputs;  // input name -> sha256
};

class Manifest {
 public:
  // The manifest in `dir`, or an empty one when there is none. A manifest that
  // does not parse is not trusted: empty, and `problem` says why.
  static Manifest load(const std::filesystem::path& dir, std::string* problem = nullptr);
  // Written to a temporary name and renamed: a crash never leaves half a manifest.
  void save(const std::filesystem::path& dir) const;

  // Hashes dir/rel now and records it as written by `phase`.
  void record(const std::filesystem::path& dir, const std::string& rel, int phase);
  // Artifacts of `phase` that are missing or whose sha256 no longer matches,
  // one line each ("weights.safetensors: sha256 mismatch").
  std::vector<std::string> stale(const std::filesystem::path& dir, int phase) const;
  // Forgets the phase and every artifact it wrote (before it is redone).
  void drop_phase(int phase);
  bool artifact_matches(const std::filesystem::path& dir, const std::string& rel) const;

  std::map<std::string, ManifestArtifact> artifacts;
  std::map<int, ManifestPhase> phases;
};

}  // namespace tessera::pipeline
