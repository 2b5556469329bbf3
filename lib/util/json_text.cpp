#include "lib/util/json_text.h"

#include <stdexcept>

namespace srkit {

nlohmann::json parse_json_text(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // The library reports the byte after the last one it read: past the end
    // means the text stopped in the middle of a value (a truncated file).
    if (e.byte > text.size()) {
      throw std::invalid_argument("not valid JSON (ends at byte " + std::to_string(text.size()) +
                                  ", cut short?)");
    }
    throw std::invalid_argument("not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument("not valid JSON (a number out of range)");
  }
}

}  // namespace srkit
