#include "lib/data/bpe_model.h"

#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "lib/data/byte_symbols.h"
#include "lib/util/format.h"
#include "lib/util/sha256.h"

namespace srkit {

namespace {

std::invalid_argument bad(const std::string& what) { return std::invalid_argument(what); }

// For messages: a token as it is written in the file, control bytes escaped.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) {
      out += strprintf("\\x%02x", unsigned(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out + "'";
}

void check_id(int64_t id, const std::string& token) {
  if (id < 0 || id > kMaxTokenId) {
    throw bad(strprintf("token %s has id %lld, expected an id in [0, %lld]", quoted(token).c_str(),
                        (long long)id, (long long)kMaxTokenId));
  }
}

// Places one token at its id, refusing an id already given to other content.
void place(BpeModel& m, int64_t id, std::string bytes, TokenKind kind, const std::string& written) {
  if (size_t(id) >= m.token_bytes.size()) {
    m.token_bytes.resize(size_t(id) + 1);
    m.kind.resize(size_t(id) + 1, TokenKind::kNone);
  }
  if (m.kind[id] != TokenKind::kNone && m.token_bytes[id] != bytes) {
    const std::string first =
        m.kind[id] == TokenKind::kBytes ? bytes_to_symbols(m.token_bytes[id]) : m.token_bytes[id];
    throw bad(strprintf("id %lld is given to two tokens, %s and %s; expected one token per id",
                        (long long)id, quoted(first).c_str(), quoted(written).c_str()));
  }
  if (m.kind[id] != TokenKind::kSpecial) m.kind[id] = kind;
  m.token_bytes[id] = std::move(bytes);
}

}  // namespace

BpeModel build_bpe_model(const BpeSpec& spec) {
  BpeModel m;
  // Added tokens first: a vocab entry with the same id and text is the same token.
  std::unordered_map<int64_t, const std::string*> added_by_id;
  for (const auto& [text, id] : spec.added) {
    check_id(id, text);
    if (text.empty()) throw bad(strprintf("added token %lld is empty", (long long)id));
    place(m, id, text, TokenKind::kSpecial, text);
    added_by_id[id] = &text;
  }
  std::unordered_map<std::string, int32_t> id_of;  // vocab string -> id
  id_of.reserve(spec.vocab.size());
  for (const auto& [written, id] : spec.vocab) {
    check_id(id, written);
    const auto added = added_by_id.find(id);
    if (added != added_by_id.end() && *added->second == written) {
      id_of[written] = int32_t(id);  // the added token, listed in the vocab too
      continue;
    }
    std::optional<std::string> bytes = symbols_to_bytes(written);
    if (!bytes || bytes->empty()) {
      throw bad(
          strprintf("vocab token %s (id %lld) is not made of byte-level symbols, as a "
                    "ByteLevel BPE vocab must be",
                    quoted(written).c_str(), (long long)id));
    }
    place(m, id, std::move(*bytes), TokenKind::kBytes, written);
    if (!id_of.emplace(written, int32_t(id)).second) {
      throw bad("vocab token " + quoted(written) + " is listed twice");
    }
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(byte_symbol(uint8_t(b)));
    if (it == id_of.end() || m.kind[it->second] != TokenKind::kBytes) {
      throw bad(
          strprintf("the vocab has no token for byte 0x%02x (symbol '%s'); a byte-level "
                    "vocab needs all 256",
                    b, byte_symbol(uint8_t(b)).c_str()));
    }
    m.byte_token[b] = it->second;
  }

  std::unordered_set<uint64_t> seen;
  m.merges.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const std::string where =
        strprintf("merge %zu (%s %s)", rank + 1, quoted(left).c_str(), quoted(right).c_str());
    const auto find = [&](const std::string& token, const char* role) {
      const auto it = id_of.find(token);
      if (it == id_of.end() || m.kind[it->second] != TokenKind::kBytes) {
        throw bad(where + ": " + role + " token " + quoted(token) + " is not in the vocab");
      }
      return it->second;
    };
    const int32_t l = find(left, "its first"), r = find(right, "its second");
    const int32_t merged = find(left + right, "the merged");
    if (!seen.insert(uint64_t(uint32_t(l)) << 32 | uint32_t(r)).second) {
      throw bad(where + " repeats an earlier merge; expected each pair once");
    }
    m.merges.push_back({l, r, merged});
  }

  for (const auto& [text, id] : spec.added) {
    if (text == spec.end_of_text) m.end_of_text = int32_t(id);
  }
  if (m.end_of_text < 0) {
    for (int32_t id = 0; id < m.vocab_size(); ++id) {
      if (m.kind[id] == TokenKind::kBytes && m.token_bytes[id] == spec.end_of_text) {
        m.end_of_text = id;
        break;
      }
    }
  }
  if (m.end_of_text < 0) {
    throw bad("no end-of-text token " + quoted(spec.end_of_text) +
              " in the added tokens or the vocab; expected one (it separates documents)");
  }
  // Special by its role, whether or not the files list it as an added token
  // (GPT-2's vocab.json has no such list), so both forms give one fingerprint.
  m.kind[m.end_of_text] = TokenKind::kSpecial;
  return m;
}

std::string bpe_fingerprint(const BpeModel& m) {
  Sha256 h;
  h.update("srkit byte-level BPE 1\n");
  for (int id = 0; id < m.vocab_size(); ++id) {
    const char kind = m.kind[id] == TokenKind::kNone    ? '-'
                      : m.kind[id] == TokenKind::kBytes ? 'b'
                                                        : 's';
    h.update(strprintf("%c %zu:", kind, m.token_bytes[id].size()));
    h.update(m.token_bytes[id]);
    h.update("\n");
  }
  for (const BpeMerge& merge : m.merges) h.update(strprintf("%d %d\n", merge.left, merge.right));
  h.update(strprintf("eot %d\n", m.end_of_text));
  return h.finish_hex();
}

}  // namespace srkit
