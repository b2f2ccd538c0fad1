#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string_view>

#include "core/error.h"
#include "core/printable.h"

namespace folio {

namespace {

// The length of the valid UTF-8 character at the start of `bytes`, or 0 when there is none.
size_t valid_character_length(const unsigned char* p, size_t size) {
  const unsigned char lead = p[0];
  if (lead < 0x80) return 1;
  size_t length;
  char32_t code_point, smallest;
  if ((lead & 0xE0) == 0xC0)
    length = 2, code_point = lead & 0x1F, smallest = 0x80;
  else if ((lead & 0xF0) == 0xE0)
    length = 3, code_point = lead & 0x0F, smallest = 0x800;
  else if ((lead & 0xF8) == 0xF0)
    length = 4, code_point = lead & 0x07, smallest = 0x10000;
  else
    return 0;
  if (length > size) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((p[k] & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (p[k] & 0x3F);
  }
  if (code_point < smallest || code_point > 0x10FFFF) return 0;
  if (code_point >= 0xD800 && code_point <= 0xDFFF) return 0;
  return length;
}

// Whether `pattern` names an assertion about the text before a match outside a character
// class: ^, \A, \G, \b or \B. PCRE2 counts \b, \B and \A as look-behinds of one character
// (PCRE2_INFO_MAXLOOKBEHIND), but not every build says so of ^ and \G: this reads the pattern
// itself, erring on the side of "yes" (a class's closing bracket is taken at its first ']').
bool names_a_start_assertion(const std::string& pattern) {
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      const bool asserts = i + 1 < pattern.size() &&
                           std::string_view("AGbB").find(pattern[i + 1]) != std::string_view::npos;
      if (asserts && !in_class) return true;
      ++i;  // an escaped character is never a bracket or a caret
    } else if (in_class) {
      // A ']' right after '[' or '[^' is a member, not the end.
      const bool first_member =
          pattern[i - 1] == '[' || (pattern[i - 1] == '^' && pattern[i - 2] == '[');
      in_class = c != ']' || first_member;
    } else if (c == '[') {
      in_class = true;
    } else if (c == '^') {
      return true;
    }
  }
  return false;
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::string& pattern)
    : pattern_(pattern), compiled_(std::make_unique<Compiled>()) {
  int error_code;
  PCRE2_SIZE error_offset;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    throw Error("the tokenizer's pre-tokenisation regex does not compile (" +
                std::string(reinterpret_cast<char*>(message)) + " at offset " +
                std::to_string(error_offset) + "): " + printable(pattern, 200));
  }
  // Without JIT (some builds lack it) the interpreter gives the same matches, more slowly.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
  uint32_t look_behind = 1;
  if (pcre2_pattern_info(compiled_->code, PCRE2_INFO_MAXLOOKBEHIND, &look_behind) != 0)
    look_behind = 1;
  starts_anywhere_ = look_behind == 0 && !names_a_start_assertion(pattern);
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer::MatchData::MatchData(const PreTokenizer& owner)
    : data(pcre2_match_data_create_from_pattern(owner.compiled_->code, nullptr)) {
  if (data == nullptr) throw std::bad_alloc();
}

PreTokenizer::MatchData::~MatchData() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(data));
}

bool PreTokenizer::find(MatchData& match, std::string_view text, size_t offset, size_t& begin,
                        size_t& end) const {
  auto* data = static_cast<pcre2_match_data*>(match.data);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The text was checked to be valid UTF-8 (split() cuts invalid bytes out), so PCRE2 need not.
  const int rc = compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), offset, 0,
                                                  data, nullptr)
                                : pcre2_match(compiled_->code, subject, text.size(), offset,
                                              PCRE2_NO_UTF_CHECK, data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    throw Error("the pre-tokenisation regex failed on the text (" +
                std::string(reinterpret_cast<char*>(message)) + "): " + pattern_);
  }
  const PCRE2_SIZE* vector = pcre2_get_ovector_pointer(data);
  begin = vector[0];
  end = vector[1];
  return true;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  split(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

size_t PreTokenizer::valid_utf8_prefix(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const size_t length = valid_character_length(p + i, bytes.size() - i);
    if (length == 0) break;
    i += length;
  }
  return i;
}

size_t PreTokenizer::invalid_utf8_prefix(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size() && valid_character_length(p + i, bytes.size() - i) == 0) ++i;
  return i;
}

}  // namespace folio
