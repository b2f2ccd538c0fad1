// UTF-8 <-> Unicode code points, read the way Python's open(path, encoding='utf-8').read() reads:
// strict decoding (no overlong forms, no surrogates, nothing above U+10FFFF) and universal
// newlines ("\r\n" and a lone "\r" become "\n"), so folio's characters are the seed's characters.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace folio {

struct Utf8Problem {
  size_t byte_offset;
  std::string what;
};

// Decodes `bytes`; on invalid input returns nullopt and fills `problem`.
std::optional<std::u32string> decode_utf8(std::string_view bytes, Utf8Problem* problem,
                                          bool translate_newlines = true);

void append_utf8(std::string& out, char32_t code_point);
std::string encode_utf8(std::u32string_view text);

// A printable description of a code point for error messages: 'x' or U+00E9.
std::string describe_code_point(char32_t code_point);

}  // namespace folio
