// Normalizers: the Unicode normal forms (through utf8proc, which implements
// them from the Unicode data files) and Sequence.
#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "tessera/core/error.h"
#include "tessera/model/tokenizer_parts.h"

namespace tessera::model::tok {
namespace {

class UnicodeForm : public Normalizer {
 public:
  UnicodeForm(std::string name, int options) : name_(std::move(name)), options_(options) {}
  std::string normalize(std::string_view s) const override {
    utf8proc_uint8_t* out = nullptr;
    // Input is valid UTF-8 by construction (Tokenizer repairs it first); any
    // failure here is therefore ours or an allocation failure.
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                      static_cast<utf8proc_ssize_t>(s.size()), &out,
                                      static_cast<utf8proc_option_t>(options_));
    if (n < 0)
      throw_error<InternalError>("{} normalization failed: {}", name_, utf8proc_errmsg(n));
    std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
    std::free(out);
    return r;
  }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  int options_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  std::string normalize(std::string_view s) const override {
    std::string cur(s);
    for (auto& p : parts_) cur = p->normalize(cur);
    return cur;
  }
  std::string name() const override { return sequence_name(parts_); }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  // STABLE keeps unassigned code points as they are, like Rust's normalizers.
  const int base = UTF8PROC_STABLE;
  if (type == "NFC") return std::make_unique<UnicodeForm>(type, base | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeForm>(type, base | UTF8PROC_DECOMPOSE);
  if (type == "NFKC")
    return std::make_unique<UnicodeForm>(type, base | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD")
    return std::make_unique<UnicodeForm>(type, base | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Sequence") {
    auto parts = sequence_parts<Normalizer>(j, "normalizers", where, make_normalizer);
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  throw_error<TokenizerError>(
      "{}: unsupported normalizer type '{}' (supported: NFC, NFD, NFKC, NFKD, Sequence)", where,
      type);
}

}  // namespace tessera::model::tok
