// UTF-8 well-formedness as the Unicode Standard defines it (Table 3-7: no
// overlong forms, no surrogates, nothing above U+10FFFF). The pre-tokenizer
// uses it to find the bytes that are not text (docs/data.md, "Bytes that are not
// UTF-8").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace srkit {

// The length (1 to 4) of the well-formed sequence that starts at s[pos], or 0
// if none does (s[pos] is then a byte that is not part of any character).
size_t utf8_sequence_length(std::string_view s, size_t pos);

// The length of the longest prefix of s that is well-formed UTF-8.
size_t utf8_valid_prefix(std::string_view s);

// The UTF-8 form of a Unicode scalar value (not a surrogate, at most U+10FFFF).
std::string utf8_encode(char32_t code_point);

}  // namespace srkit
