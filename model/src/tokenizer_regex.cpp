// PCRE2 behind tok::Regex. HF runs these patterns with Oniguruma; PCRE2 with
// UTF|UCP agrees on every construct the Llama-3, Qwen2 and GPT-2 patterns use.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "tessera/core/error.h"
#include "tessera/model/tokenizer_parts.h"

namespace tessera::model::tok {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  int n = pcre2_get_error_message(code, buf, sizeof buf);
  return n < 0 ? fmt::format("PCRE2 error {}", code) : std::string(reinterpret_cast<char*>(buf));
}

// One JIT stack per thread, so one compiled pattern can be shared by threads.
// 32 KiB (PCRE2's default) is too small for long whitespace runs.
pcre2_jit_stack* thread_jit_stack(void*) {
  struct Holder {
    pcre2_jit_stack* s = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    ~Holder() { pcre2_jit_stack_free(s); }
  };
  thread_local Holder h;
  return h.s;
}

struct MatchState {
  pcre2_match_data* md;
  pcre2_match_context* mc;
  MatchState(const pcre2_code* code)
      : md(pcre2_match_data_create_from_pattern(code, nullptr)),
        mc(pcre2_match_context_create(nullptr)) {
    if (!md || !mc) throw std::bad_alloc();
    pcre2_jit_stack_assign(mc, thread_jit_stack, nullptr);
  }
  ~MatchState() {
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where)
    : pattern_(pattern), where_(where) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code)
    throw_error<TokenizerError>("{}: bad regex /{}/ at offset {}: {}", where, pattern, off,
                                pcre2_message(err));
  // Without JIT PCRE2 still matches correctly, only slower, so a failure here
  // (e.g. a platform without JIT support) is not an error.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view s, const std::function<void(size_t, size_t)>& f) const {
  auto* code = static_cast<const pcre2_code*>(code_);
  MatchState st(code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t at = 0;
  while (at <= s.size()) {
    int rc = pcre2_match(code, subject, s.size(), at, PCRE2_NO_UTF_CHECK, st.md, st.mc);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0)
      throw_error<TokenizerError>("{}: regex /{}/ failed on a {}-byte piece: {}", where_,
                                  pattern_, s.size(), pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      f(b, e);
      at = e;
    } else {
      // HF ignores empty matches; step over one whole code point.
      if (b >= s.size()) return;
      size_t i = b;
      next_code_point(s, i);
      at = i;
    }
  }
}

bool Regex::matches_anywhere(std::string_view s) const {
  auto* code = static_cast<const pcre2_code*>(code_);
  MatchState st(code);
  int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                       PCRE2_NO_UTF_CHECK, st.md, st.mc);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
    throw_error<TokenizerError>("{}: regex /{}/ failed: {}", where_, pattern_, pcre2_message(rc));
  return rc >= 0;
}

}  // namespace tessera::model::tok
