// The metadata of a training checkpoint: what save_checkpoint writes into the
// safetensors "__metadata__" (string -> string) and the one parser that every
// reader of it uses, with each field range-checked. Format "srkit-checkpoint-2":
//   format         "srkit-checkpoint-2"
//   step, data_cursor, seed    decimal unsigned 64-bit integers
//   world_size     decimal integer >= 1 (ranks of the writing run)
//   strategy       the precision strategy's name (non-empty)
//   model          JSON object: the GPT shape
//   config         JSON object: the TrainConfig
//   optimizer_range  "0:N": the optimizer state covers all N parameters
//   checksums      JSON object: tensor name -> checksum_bytes of its bytes as
//                  16 lowercase hex digits, for every tensor in the file
//   provenance     JSON object (optional): the writing build, host, backend
//                  and world (lib/util/build_info.h); informational
// Format 1 (no checksums) is refused: its tensor bytes cannot be verified.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace srkit {

struct CheckpointInfo {
  uint64_t step = 0;         // optimizer steps completed
  uint64_t data_cursor = 0;  // global batches consumed (= step: batches are a pure function of it)
  uint64_t seed = 0;
  std::string strategy;
  nlohmann::json config;  // the TrainConfig as JSON
  int world_size = 1;     // ranks of the run that wrote it (informational)
  nlohmann::json provenance = nlohmann::json::object();  // build, host, backend (informational)
};

struct CheckpointMetadata {
  CheckpointInfo info;
  nlohmann::json model;                       // the GPT shape (an object)
  uint64_t optimizer_elements = 0;            // N of optimizer_range "0:N"
  std::map<std::string, uint64_t> checksums;  // tensor name -> checksum_bytes
};

// The metadata strings as save_checkpoint stores them.
std::map<std::string, std::string> checkpoint_metadata_strings(const CheckpointMetadata& m);

// Parses and checks every field. Throws std::runtime_error, one line naming
// the file and the field: "PATH: checkpoint metadata 'step': expected a decimal
// unsigned integer, got '12abc'"; a missing field or a file that is not an
// srkit checkpoint at all is named as such.
CheckpointMetadata parse_checkpoint_metadata(const std::map<std::string, std::string>& meta,
                                             const std::string& path);

// Checksums as stored: 16 lowercase hex digits.
std::string checksum_hex(uint64_t checksum);

}  // namespace srkit
