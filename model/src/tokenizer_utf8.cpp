// UTF-8 repair and the GPT-2 byte-level alphabet shared by the ByteLevel
// pre-tokenizer and decoder.
#include <array>
#include <string>

#include "tessera/model/tokenizer_parts.h"

namespace tessera::model::tok {
namespace {

// Length of the sequence a lead byte announces and the range its second byte
// must fall in (Unicode Table 3-7); len 0 for bytes that can never lead.
struct LeadInfo {
  int len;
  unsigned char lo, hi;
};

LeadInfo lead_info(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // excludes surrogates
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // caps at U+10FFFF
  return {0, 0, 0};
}

// Number of bytes of s[i..] that form a valid prefix of the sequence led by
// s[i] (1 for a lone lead byte), and whether the whole sequence is complete.
size_t valid_prefix(std::string_view s, size_t i, bool& complete) {
  const auto b = static_cast<unsigned char>(s[i]);
  LeadInfo li = lead_info(b);
  complete = false;
  if (li.len == 0) return 1;
  size_t k = 1;
  for (; k < static_cast<size_t>(li.len) && i + k < s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    const unsigned char lo = k == 1 ? li.lo : 0x80, hi = k == 1 ? li.hi : 0xBF;
    if (c < lo || c > hi) break;
  }
  complete = k == static_cast<size_t>(li.len);
  return k;
}

std::array<char32_t, 256> byte_to_cp() {
  std::array<char32_t, 256> m{};
  char32_t extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    m[b] = printable ? static_cast<char32_t>(b) : extra++;
  }
  return m;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    bool complete = false;
    size_t k = valid_prefix(s, i, complete);
    if (!complete) return false;
    i += k;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out.push_back(s[i++]);
      continue;
    }
    bool complete = false;
    size_t k = valid_prefix(s, i, complete);
    if (complete)
      out.append(s.substr(i, k));
    else
      out.append("\xEF\xBF\xBD");
    i += k;
  }
  return out;
}

char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  char32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < len && i + k < s.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += static_cast<size_t>(len);
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

const std::array<std::string, 256>& byte_level_alphabet() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    auto cps = byte_to_cp();
    for (int b = 0; b < 256; ++b) append_utf8(t[b], cps[b]);
    return t;
  }();
  return table;
}

std::string byte_level_encode(std::string_view bytes) {
  const auto& alpha = byte_level_alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += alpha[static_cast<unsigned char>(c)];
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  // The alphabet's code points are all below 324 (256 + 68 remapped bytes).
  static const std::array<int16_t, 324> cp_to_byte = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    auto cps = byte_to_cp();
    for (int b = 0; b < 256; ++b) t[cps[b]] = static_cast<int16_t>(b);
    return t;
  }();
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    char32_t cp = next_code_point(token, i);
    if (cp >= cp_to_byte.size() || cp_to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(cp_to_byte[cp]));
  }
  return out;
}

}  // namespace tessera::model::tok
