#pragma once
// manifest.json of a deployment directory (deploy.h): what each phase wrote,
// with the sha256 of every artifact, and what each phase read (its inputs'
// sha256), so that a rerun can tell a trustworthy passed phase from one whose
// files were edited, truncated, or computed from different inputs.
//
//   {"format": "tessera-deploy-manifest", "version": 3,
//    "artifacts": {"phase2.json": {"sha256": "...", "phase": 2}, ...},
//    "phases": {"2": {"status": "passed", "inputs": {"options": "...", "source": "...",
//                                                     "oracle.safetensors": "...", ...}}},
//    "seal": "..."}
//
// The verdict chain. A phase's inputs are the options hash, the source hash
// and the sha256 of every artifact earlier phases wrote, read from disk when
// the phase ran; a phase is written "running" before it runs and every later
// phase is dropped, so a failed or killed redeploy never leaves an older
// "passed" behind. `seal` is sha256 of the rest of the manifest.
//
// What this does and does not protect (check_deployment, deploy resume):
// - An artifact edited, truncated, replaced or deleted: caught (sha256).
// - That edit plus manifest.json edited to give the file's new sha256: caught
//   twice: the seal no longer matches, and every later phase recorded the old
//   sha256 as an input.
// - A phase killed or failed in a redeploy: its status is not "passed" and
//   later phases are gone, so `run` refuses and a resume redoes it.
// - A resumed deploy additionally re-derives model/config.json,
//   model/tokenizer.json and spec.json from the source and options, so an
//   edit of those is caught however manifest.json was rewritten.
// - Not caught: someone who edits files and then recomputes every sha256,
//   every phase's inputs and the seal (the format is public and nothing is
//   secret). manifest.json is an integrity record, not a signature; against
//   a deliberate forger only a redeploy from the source (or a key kept
//   outside the directory) helps.
#include <cstddef>
#include <filesystem>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tessera::pipeline {

// A file's digest: lowercase hex sha256 (OpenSSL EVP) of a file under 1 GiB;
// of a bigger one (packed weights, a model's safetensors), "sha256-64m:" and
// the hex sha256 of its 64 MiB chunks' hex sha256, one per line, so that its
// chunks are hashed on every core (`split -b 64M`, `sha256sum` of the parts,
// their digests one per line through `sha256sum` again gives the same). FileError
// naming the path when it cannot be read.
std::string sha256_file(const std::filesystem::path& file);
// The hex sha256 of the file's `chunk_bytes` chunks' hex sha256, one per line
// (the part of sha256_file after its prefix, with 64 MiB chunks).
std::string sha256_tree(const std::filesystem::path& file, uint64_t chunk_bytes);
std::string sha256_bytes(std::span<const std::byte> data);
std::string sha256_text(const std::string& text);

// sha256 of dir/rel; a missing file hashes as "missing". Deploy passes a
// memoizing one so that a large artifact is hashed once per phase decision.
using FileHasher = std::function<std::string(const std::string& rel)>;
FileHasher plain_hasher(const std::filesystem::path& dir);

struct ManifestArtifact {
  std::string sha256;
  int phase = 0;
};

struct ManifestPhase {
  std::string status;                         // "running" | "passed" | "failed"
  std::map<std::string, std::string> inputs;  // input name -> sha256
};

class Manifest {
 public:
  // The manifest in `dir`, or an empty one when there is none. A manifest that
  // does not parse, or whose seal does not match its content, is not trusted:
  // empty, and `problem` says why.
  static Manifest load(const std::filesystem::path& dir, std::string* problem = nullptr);
  // Sealed, written to a temporary name and renamed: a crash never leaves half a manifest.
  void save(const std::filesystem::path& dir) const;

  // Hashes dir/rel now and records it as written by `phase`.
  void record(const std::filesystem::path& dir, const std::string& rel, int phase);
  // Artifacts of `phase` that are missing or whose sha256 no longer matches,
  // one line each ("weights.safetensors: sha256 mismatch").
  std::vector<std::string> stale(const std::filesystem::path& dir, int phase) const;
  std::vector<std::string> stale(const FileHasher& sha, int phase) const;
  // Forgets the phase and every artifact it wrote (before it is redone).
  void drop_phase(int phase);
  bool artifact_matches(const std::filesystem::path& dir, const std::string& rel) const;
  // sha256 of everything but the seal (canonical JSON).
  std::string seal() const;

  std::map<std::string, ManifestArtifact> artifacts;
  std::map<int, ManifestPhase> phases;
};

// The current sha256 of every artifact of phases before `phase` (what a phase
// run now would record as its artifact inputs); a missing file hashes as "missing".
std::map<std::string, std::string> earlier_artifacts(const FileHasher& sha, const Manifest& m, int phase);

// Everything `tessera run` can re-check from the directory alone (the source
// model is not needed): every recorded phase passed; every artifact matches its
// sha256; each phase's recorded artifact inputs are the files on disk now; all
// phases were judged on the same options and source as phase 0; `required`
// files are artifacts. One line per problem; empty: the manifest's verdicts
// re-check. (A manifest that failed to load has no phases: the caller reports
// Manifest::load's problem.)
std::vector<std::string> check_deployment(const std::filesystem::path& dir, const Manifest& m,
                                          const std::vector<std::string>& required);

// An exclusive (writer) or shared (reader) flock on dir/.tessera.lock, held
// for the object's lifetime. A second writer, or a reader while a writer
// holds it, gets UsageError naming the directory: one deploy per directory.
class DirLock {
 public:
  enum class Mode { exclusive, shared };
  DirLock(const std::filesystem::path& dir, Mode mode, const std::string& who);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tessera::pipeline
