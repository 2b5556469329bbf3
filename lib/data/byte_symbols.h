// GPT-2's byte-level alphabet: each of the 256 byte values is written as one
// printable Unicode character in vocab and merges files, so that tokens are
// readable text without spaces or control characters. Printable Latin-1 bytes
// ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other 68
// bytes, in increasing order, take U+0100, U+0101, ... (space 0x20 -> U+0120 'Ġ',
// newline 0x0A -> U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace srkit {

// The code point that stands for byte b.
char32_t byte_symbol_code_point(uint8_t b);

// The UTF-8 form of b's symbol.
const std::string& byte_symbol(uint8_t b);

// bytes written in the byte-level alphabet (each byte one symbol).
std::string bytes_to_symbols(std::string_view bytes);

// The bytes a byte-level token string stands for; nullopt if it is not UTF-8
// made only of byte symbols.
std::optional<std::string> symbols_to_bytes(std::string_view symbols);

}  // namespace srkit
