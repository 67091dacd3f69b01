// Decoders: ByteLevel (printable chars -> bytes, then lossy UTF-8 as Rust's
// String::from_utf8_lossy) and Sequence.
#include "tessera/core/error.h"
#include "tessera/model/tokenizer_parts.h"

namespace tessera::model::tok {
namespace {

class ByteLevelDecoder : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      // A token outside the alphabet (an added token such as "<think>" is
      // inside it, but e.g. CJK content is not) contributes its own UTF-8.
      if (auto b = byte_level_decode(t))
        bytes += *b;
      else
        bytes += t;
    }
    return {to_valid_utf8(bytes)};
  }
  std::string name() const override { return "ByteLevel"; }
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (auto& p : parts_) tokens = p->decode_chain(std::move(tokens));
    return tokens;
  }
  std::string name() const override { return sequence_name(parts_); }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Sequence") {
    auto parts = sequence_parts<Decoder>(j, "decoders", where, make_decoder);
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  throw_error<TokenizerError>("{}: unsupported decoder type '{}' (supported: ByteLevel, Sequence)",
                              where, type);
}

}  // namespace tessera::model::tok
