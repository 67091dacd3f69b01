// Fuzz target: a whole GGUF file (model/gguf.h, model/gguf_model.h) through
// every stage `tessera -m FILE.gguf` runs on it: header, metadata, tensor
// table, dequantization of every tensor, ModelConfig from the metadata, and the
// tokenizer built from tokenizer.ggml.* (then used on a short text). Seeds:
// tests/data/fuzz/gguf/ (tools/reference/make_gguf_fuzz_seeds.py).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

#include "fuzz_common.h"
#include "tessera/model/gguf.h"
#include "tessera/model/gguf_model.h"

namespace {

// Dequantizing a tensor is bounded by its bytes in the file, which the parser
// has checked lie inside the input; what the reader trusts afterwards is that
// every tensor's span is inside the file and its element count fits it.
void check_tensors(const tessera::model::GgufFile& f, std::span<const std::byte> file) {
  for (const auto& t : f.tensors()) {
    const auto bytes = f.tensor_bytes(t);
    if (bytes.data() < file.data() || bytes.data() + bytes.size() > file.data() + file.size()) std::abort();
    const auto x = f.tensor_f32(t);
    if (static_cast<int64_t>(x.numel()) != t.numel()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The parser keeps spans into the bytes: hold a copy for its lifetime, as
  // a mapped file would be held.
  auto owner = std::shared_ptr<std::byte[]>(new std::byte[size ? size : 1]);
  if (size) std::memcpy(owner.get(), data, size);
  const std::span<const std::byte> bytes(owner.get(), size);
  return tessera::fuzz::run_one([&] {
    const auto f = tessera::model::GgufFile::parse(owner, bytes, "fuzz.gguf");
    check_tensors(f, bytes);
    const auto config = tessera::model::gguf_config(f);
    const auto tok = tessera::model::gguf_tokenizer(f);
    const auto ids = tok.encode("hello there");
    for (const auto id : ids)
      if (id < 0) std::abort();
    (void)config;
  });
}
