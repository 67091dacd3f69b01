// Fuzz target: tokenizer.json -> Tokenizer (model/tokenizer.h), then an
// encode / decode round of a fixed text that touches bytes, digits,
// whitespace runs and non-ASCII, so that a tokenizer that loads also runs.
#include "fuzz_common.h"
#include "tessera/model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = tessera::fuzz::as_json(data, size);
  if (j.is_discarded()) return 0;
  return tessera::fuzz::run_one([&] {
    const auto tok = tessera::model::Tokenizer::from_json(j, "fuzz/tokenizer.json");
    const auto ids = tok.encode("Once upon a time,  12345 caf\xc3\xa9 \xe2\x82\xac!\n\tend", true);
    (void)tok.decode(ids, false);
    (void)tok.decode(ids, true);
    (void)tok.summary();
  });
}
