#pragma once
// Shared by the fuzz targets (fuzz/*.cpp): what counts as a finding.
// A typed tessera::Error is the contract for bad input (the CLI prints one line
// and exits 2/3/4); an InternalError (exit 70), any other exception, a crash,
// a sanitizer report or a hang is a bug, and aborts so the fuzzer keeps the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"

namespace tessera::fuzz {

template <class F>
int run_one(F&& fn) {
  try {
    fn();
  } catch (const InternalError& e) {
    std::fprintf(stderr, "fuzz: internal error (exit 70) on bad input: %s\n", e.what());
    std::abort();
  } catch (const Error&) {
    // The typed, one-line error bad input must produce.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: untyped exception escaped (the CLI would exit 70): %s\n", e.what());
    std::abort();
  }
  return 0;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input as JSON, or discarded when it does not parse (every loader turns
// that into its own typed error before the parser under test runs).
inline nlohmann::json as_json(const uint8_t* data, size_t size) {
  return nlohmann::json::parse(data, data + size, nullptr, false);
}

}  // namespace tessera::fuzz
