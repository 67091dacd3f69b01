#pragma once
// Helpers shared by the pipeline tests.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tessera/core/mutants.h"

namespace tessera::pipeline::test_util {

// A fresh directory per test process (ctest runs each test in its own), so
// tests of one binary never share a deployment.
inline std::filesystem::path scratch(const std::string& name) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("tessera-pipeline-test-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(p);
  return p;
}

inline std::string slurp(const std::filesystem::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Deterministic, roughly Gaussian values: the sum of 4 uniforms on
// [-0.5, 0.5) (variance 1/3) from a 64-bit LCG, the same on every platform.
class Gauss4 {
 public:
  explicit Gauss4(uint64_t seed) : z_(seed) {}
  double operator()() { return uni() + uni() + uni() + uni(); }

 private:
  double uni() {
    z_ = z_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(z_ >> 11) / 9007199254740992.0 - 0.5;
  }
  uint64_t z_;
};

// Switches a named planted bug on for one scope.
struct MutantScope {
  explicit MutantScope(Mutant m) { set_active_mutant(m); }
  ~MutantScope() { set_active_mutant(Mutant::none); }
  MutantScope(const MutantScope&) = delete;
  MutantScope& operator=(const MutantScope&) = delete;
};

}  // namespace tessera::pipeline::test_util
