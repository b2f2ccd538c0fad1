#include "data/utf8.h"

#include <cstdio>

namespace folio {

std::optional<std::u32string> decode_utf8(std::string_view bytes, Utf8Problem* problem,
                                          bool translate_newlines) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t size = bytes.size();
  auto fail = [&](size_t offset, const char* what) -> std::optional<std::u32string> {
    if (problem != nullptr) *problem = {offset, what};
    return std::nullopt;
  };
  size_t i = 0;
  while (i < size) {
    const unsigned char lead = data[i];
    if (lead < 0x80) {
      if (translate_newlines && lead == '\r') {
        out.push_back(U'\n');
        i += (i + 1 < size && data[i + 1] == '\n') ? 2 : 1;
        continue;
      }
      out.push_back(lead);
      ++i;
      continue;
    }
    int length;
    char32_t code_point;
    char32_t smallest;
    if ((lead & 0xE0) == 0xC0) length = 2, code_point = lead & 0x1F, smallest = 0x80;
    else if ((lead & 0xF0) == 0xE0) length = 3, code_point = lead & 0x0F, smallest = 0x800;
    else if ((lead & 0xF8) == 0xF0) length = 4, code_point = lead & 0x07, smallest = 0x10000;
    else return fail(i, "a byte that cannot start a UTF-8 character");
    if (i + length > size) return fail(i, "a UTF-8 character cut off by the end of the file");
    for (int k = 1; k < length; ++k) {
      const unsigned char next = data[i + k];
      if ((next & 0xC0) != 0x80) return fail(i, "an invalid UTF-8 continuation byte");
      code_point = (code_point << 6) | (next & 0x3F);
    }
    if (code_point < smallest) return fail(i, "an overlong UTF-8 encoding");
    if (code_point > 0x10FFFF) return fail(i, "a code point above U+10FFFF");
    if (code_point >= 0xD800 && code_point <= 0xDFFF)
      return fail(i, "an encoded UTF-16 surrogate");
    out.push_back(code_point);
    i += length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

std::string describe_code_point(char32_t c) {
  char hex[16];
  std::snprintf(hex, sizeof(hex), "U+%04X", static_cast<unsigned>(c));
  if (c >= 0x21 && c < 0x7F) return "'" + std::string(1, static_cast<char>(c)) + "' (" + hex + ")";
  if (c >= 0xA0) {
    std::string text = "'";
    append_utf8(text, c);
    return text + "' (" + hex + ")";
  }
  return hex;
}

}  // namespace folio
