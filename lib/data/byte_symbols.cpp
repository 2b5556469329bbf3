#include "lib/data/byte_symbols.h"

#include <array>

#include "lib/data/utf8.h"

namespace srkit {

namespace {

constexpr char32_t kLastSymbol = 0x100 + 67;  // 68 remapped bytes: U+0100..U+0143

struct Alphabet {
  std::array<char32_t, 256> code_point{};
  std::array<std::string, 256> utf8;
  std::array<int, kLastSymbol + 1> byte_of;  // -1: no byte's symbol

  Alphabet() {
    byte_of.fill(-1);
    char32_t next_remapped = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      code_point[b] = printable ? char32_t(b) : next_remapped++;
      utf8[b] = utf8_encode(code_point[b]);
      byte_of[code_point[b]] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

char32_t byte_symbol_code_point(uint8_t b) { return alphabet().code_point[b]; }

const std::string& byte_symbol(uint8_t b) { return alphabet().utf8[b]; }

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byte_symbol(static_cast<uint8_t>(c));
  return out;
}

std::optional<std::string> symbols_to_bytes(std::string_view symbols) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(symbols.size());
  size_t pos = 0;
  while (pos < symbols.size()) {
    // Every symbol is below U+0800, so it takes one or two UTF-8 bytes.
    const size_t n = utf8_sequence_length(symbols, pos);
    char32_t cp;
    if (n == 1) {
      cp = static_cast<unsigned char>(symbols[pos]);
    } else if (n == 2) {
      cp = char32_t(static_cast<unsigned char>(symbols[pos]) & 0x1F) << 6 |
           char32_t(static_cast<unsigned char>(symbols[pos + 1]) & 0x3F);
    } else {
      return std::nullopt;
    }
    if (cp > kLastSymbol || a.byte_of[cp] < 0) return std::nullopt;
    out += char(a.byte_of[cp]);
    pos += n;
  }
  return out;
}

}  // namespace srkit
