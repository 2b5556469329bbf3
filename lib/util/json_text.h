// JSON from a user's file, with a one-line reason when it does not parse: the
// library's own message ("[json.exception.parse_error.101] parse error at line
// 1, column 40: syntax error while parsing object - unexpected end of input;
// expected '}'") says more about the parser than about the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace srkit {

// Parses text; throws std::invalid_argument "not valid JSON (ends at byte N,
// cut short?)", "not valid JSON (at byte N)" or "not valid JSON (a number out
// of range)", for the caller to prefix with the file's name.
nlohmann::json parse_json_text(const std::string& text);

}  // namespace srkit
