// Loading a training checkpoint refuses what it cannot trust, each time with
// one line naming the file and the culprit: metadata that is not what the
// writer writes (parse_checkpoint_metadata), tensor bytes that do not hash to
// their saved checksum, non-finite weights or state and a negative second
// moment, and paths that are not regular files (resolve_checkpoint).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "lib/backend/backend.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/model/gpt.h"
#include "lib/precision.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/checkpoint_metadata.h"
#include "lib/train/optimizer.h"
#include "lib/util/checksum.h"
#include "lib/util/temp_dir.h"
#include "tests/special_files.h"

using namespace srkit;
using ::testing::HasSubstr;

namespace {

template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return "";
}

// A tiny model with initialised weights and a fresh optimizer on the CPU.
struct TinyRun {
  explicit TinyRun(const std::string& strategy_name)
      : backend(make_cpu_backend(1)), strategy(strategy_from_string(strategy_name)) {
    model = std::make_unique<GPT>(*backend, gpt_preset("tiny"), strategy.weights());
    model->init_weights(11);
    optimizer = std::make_unique<Optimizer>(*model, strategy, 11);
  }
  CheckpointInfo info() const {
    CheckpointInfo i;
    i.step = 5;
    i.data_cursor = 5;
    i.seed = 11;
    i.strategy = strategy.name;
    i.config = {{"batch", 4}};
    i.world_size = 1;
    return i;
  }
  std::unique_ptr<Backend> backend;
  PrecisionStrategy strategy;
  std::unique_ptr<GPT> model;
  std::unique_ptr<Optimizer> optimizer;
};

// Where a tensor's bytes start in a safetensors file.
uint64_t file_offset_of(const std::string& path, const std::string& tensor) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), std::streamsize(n));
  return 8 + n + nlohmann::json::parse(header).at(tensor).at("data_offsets")[0].get<uint64_t>();
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x10);
  f.seekp(std::streamoff(offset));
  f.write(&c, 1);
}

// The same tensors with other metadata, written as a new file.
void rewrite_metadata(const std::string& path,
                      const std::function<void(std::map<std::string, std::string>&)>& edit) {
  std::map<std::string, std::string> meta;
  std::vector<std::pair<SafetensorsReader::Info, std::vector<char>>> tensors;
  std::vector<std::string> names;
  {
    const SafetensorsReader r(path);
    meta = r.metadata();
    names = r.names();
    for (const std::string& name : names) {
      std::vector<char> bytes(r.info(name).nbytes);
      r.read(name, bytes.data(), bytes.size());
      tensors.emplace_back(r.info(name), std::move(bytes));
    }
  }
  edit(meta);
  std::vector<TensorRef> refs;
  for (size_t i = 0; i < names.size(); ++i) {
    refs.push_back({names[i], tensors[i].first.dtype, tensors[i].first.shape,
                    tensors[i].second.data(), tensors[i].second.size()});
  }
  save_safetensors(path, refs, meta);
}

// Metadata as save_checkpoint writes it, for parser tests.
std::map<std::string, std::string> good_metadata() {
  CheckpointMetadata m;
  m.info.step = 1000;
  m.info.data_cursor = 1000;
  m.info.seed = 18446744073709551615ull;
  m.info.strategy = "bf16-sr";
  m.info.config = {{"batch", 8}, {"lr", 0.001}};
  m.info.world_size = 2;
  m.model = {{"layers", 2}, {"channels", 64}};
  m.optimizer_elements = 123;
  m.checksums = {{"wte", 0x0123456789abcdefull}, {"optimizer.adam_v", 0}};
  return checkpoint_metadata_strings(m);
}

}  // namespace

TEST(CheckpointMetadata, RoundTripsEveryField) {
  const CheckpointMetadata m = parse_checkpoint_metadata(good_metadata(), "c.safetensors");
  EXPECT_EQ(m.info.step, 1000u);
  EXPECT_EQ(m.info.data_cursor, 1000u);
  EXPECT_EQ(m.info.seed, 18446744073709551615ull);
  EXPECT_EQ(m.info.strategy, "bf16-sr");
  EXPECT_EQ(m.info.config.at("batch"), 8);
  EXPECT_EQ(m.info.world_size, 2);
  EXPECT_EQ(m.model.at("channels"), 64);
  EXPECT_EQ(m.optimizer_elements, 123u);
  EXPECT_EQ(m.checksums.at("wte"), 0x0123456789abcdefull);
  EXPECT_EQ(m.checksums.at("optimizer.adam_v"), 0u);
  EXPECT_EQ(good_metadata().at("checksums"),
            R"({"optimizer.adam_v":"0000000000000000","wte":"0123456789abcdef"})");
  EXPECT_EQ(good_metadata().at("format"), "srkit-checkpoint-2");
}

TEST(CheckpointMetadata, EveryBadFieldIsOneLineNamingFileAndField) {
  struct Case {
    std::string field, value, expect;
  };
  const Case cases[] = {
      {"step", "12abc", "'step': expected a decimal unsigned integer below 2^64, got '12abc'"},
      {"step", "-1", "'step': expected a decimal unsigned integer below 2^64, got '-1'"},
      {"step", "", "'step': expected a decimal unsigned integer"},
      {"step", "+5", "'step': expected a decimal unsigned integer"},
      {"step", " 5", "'step': expected a decimal unsigned integer"},
      {"step", "1e3", "'step': expected a decimal unsigned integer"},
      {"data_cursor", "18446744073709551616", "'data_cursor': expected a decimal unsigned integer"},
      {"seed", "0x10", "'seed': expected a decimal unsigned integer"},
      {"world_size", "0", "'world_size': expected an integer from 1 to 2147483647, got 0"},
      {"world_size", "2147483648", "'world_size': expected an integer from 1"},
      {"world_size", "-2", "'world_size': expected a decimal unsigned integer"},
      {"strategy", "", "'strategy': empty"},
      {"config", "{\"batch\": 8", "'config': not valid JSON (at byte 12)"},
      {"config", "[1, 2]", "'config': expected a JSON object"},
      {"config", "{\"lr\": 1e999}", "'config': not valid JSON (a number out of range)"},
      {"model", "7", "'model': expected a JSON object"},
      {"optimizer_range", "1:5", "'optimizer_range': expected '0:N' (the whole parameter buffer)"},
      {"optimizer_range", "0:", "'optimizer_range': expected '0:N'"},
      {"optimizer_range", "0:-3", "'optimizer_range': expected '0:N'"},
      {"checksums", "{\"wte\": 5}", "'checksums': tensor 'wte': expected 16 lowercase hex digits"},
      {"checksums", "{\"wte\": \"0123456789ABCDEF\"}", "expected 16 lowercase hex digits"},
      {"checksums", "{\"wte\": \"-123456789abcdef\"}", "expected 16 lowercase hex digits"},
      {"checksums", "{\"wte\": \"0123\"}", "expected 16 lowercase hex digits"},
      {"format", "srkit-checkpoint-3", "unsupported checkpoint format 'srkit-checkpoint-3'"},
      {"format", "srkit-checkpoint-1",
       "checkpoint format 'srkit-checkpoint-1' has no tensor checksums"},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> meta = good_metadata();
    meta[c.field] = c.value;
    const std::string msg = error_of([&] { parse_checkpoint_metadata(meta, "dir/c.safetensors"); });
    EXPECT_THAT(msg, HasSubstr("dir/c.safetensors: ")) << c.field << "=" << c.value;
    EXPECT_THAT(msg, HasSubstr(c.expect)) << c.field << "=" << c.value;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  }
  for (const char* field : {"step", "data_cursor", "seed", "world_size", "strategy", "config",
                            "optimizer_range", "checksums"}) {
    std::map<std::string, std::string> meta = good_metadata();
    meta.erase(field);
    EXPECT_THAT(
        error_of([&] { parse_checkpoint_metadata(meta, "c.safetensors"); }),
        HasSubstr(std::string("c.safetensors: checkpoint metadata '") + field + "': missing"));
  }
  std::map<std::string, std::string> no_model = good_metadata();
  no_model.erase("model");
  EXPECT_THAT(error_of([&] { parse_checkpoint_metadata(no_model, "c.safetensors"); }),
              HasSubstr("c.safetensors: checkpoint metadata has no 'model' (the model's shape)"));
  EXPECT_THAT(error_of([&] { parse_checkpoint_metadata({}, "c.safetensors"); }),
              HasSubstr("c.safetensors: not an srkit checkpoint"));
}

TEST(CheckpointLoad, SaveThenLoadRestoresWeightsAndState) {
  TempDir dir("ckload");
  const std::string path = dir.file("c.safetensors");
  TinyRun a("mixed");
  save_checkpoint(path, *a.model, *a.optimizer, a.info());
  TinyRun b("mixed");
  b.model->init_weights(99);
  const CheckpointInfo info = load_checkpoint(path, *b.model, *b.optimizer);
  EXPECT_EQ(info.step, 5u);
  EXPECT_EQ(info.seed, 11u);
  EXPECT_EQ(info.config.at("batch"), 4);
  EXPECT_EQ(b.model->weights_as_f32(), a.model->weights_as_f32());
  const CheckpointMetadata meta =
      parse_checkpoint_metadata(SafetensorsReader(path).metadata(), path);
  const SafetensorsReader r(path);
  for (const std::string& name : r.names()) {
    std::vector<char> bytes(r.info(name).nbytes);
    r.read(name, bytes.data(), bytes.size());
    EXPECT_EQ(meta.checksums.at(name), checksum_bytes(bytes.data(), bytes.size())) << name;
  }
  EXPECT_EQ(meta.checksums.size(), r.names().size());
}

// Two writers mixing one file, or a bit flipped on disk: the bytes no longer
// hash to the checksum stored with them, and the error names the tensor.
TEST(CheckpointLoad, ACorruptedTensorByteFailsItsChecksum) {
  TempDir dir("ckload");
  for (const std::string tensor : {"wte", "optimizer.adam_v", "optimizer.master"}) {
    const std::string path = dir.file("c.safetensors");
    TinyRun a("mixed");
    save_checkpoint(path, *a.model, *a.optimizer, a.info());
    flip_byte(path, file_offset_of(path, tensor) + 3);
    const std::string msg = error_of([&] { load_checkpoint(path, *a.model, *a.optimizer); });
    EXPECT_THAT(msg, HasSubstr(path + ": tensor '" + tensor + "' does not match its checksum"));
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
}

TEST(CheckpointLoad, ATensorWithoutAChecksumIsRefused) {
  TempDir dir("ckload");
  const std::string path = dir.file("c.safetensors");
  TinyRun a("bf16-sr");
  save_checkpoint(path, *a.model, *a.optimizer, a.info());
  rewrite_metadata(path, [](std::map<std::string, std::string>& m) {
    nlohmann::json sums = nlohmann::json::parse(m.at("checksums"));
    sums.erase("optimizer.adam_m");
    m["checksums"] = sums.dump();
  });
  EXPECT_THAT(error_of([&] { load_checkpoint(path, *a.model, *a.optimizer); }),
              HasSubstr(path + ": tensor 'optimizer.adam_m' has no checksum in the metadata"));
}

// Bad metadata in a real file: read_checkpoint_info and load_checkpoint both
// refuse it with the same one line naming the file and field.
TEST(CheckpointLoad, BadMetadataInAFileNamesFileAndField) {
  TempDir dir("ckload");
  const std::string path = dir.file("c.safetensors");
  TinyRun a("bf16");
  struct Case {
    std::string field, value, expect;
  };
  const Case cases[] = {
      {"step", "12abc", "checkpoint metadata 'step': expected a decimal unsigned integer"},
      {"seed", "-1", "checkpoint metadata 'seed': expected a decimal unsigned integer"},
      {"world_size", "0", "checkpoint metadata 'world_size': expected an integer from 1"},
      {"config", "{not json", "checkpoint metadata 'config': not valid JSON"},
      {"model", "", "checkpoint has no 'model'"},
  };
  for (const Case& c : cases) {
    save_checkpoint(path, *a.model, *a.optimizer, a.info());
    rewrite_metadata(path, [&](std::map<std::string, std::string>& m) {
      if (c.value.empty() && c.field == "model") {
        m.erase("model");
      } else {
        m[c.field] = c.value;
      }
    });
    const std::string want = c.field == "model" ? "checkpoint metadata has no 'model'" : c.expect;
    EXPECT_THAT(error_of([&] { read_checkpoint_info(path); }), HasSubstr(path + ": " + want));
    EXPECT_THAT(error_of([&] { load_checkpoint(path, *a.model, *a.optimizer); }),
                HasSubstr(path + ": " + want));
  }
}

// Values a good writer never saves, with a correct checksum (written through
// save_checkpoint): the value check on load names the tensor and the index.
TEST(CheckpointLoad, NonFiniteWeightsOrStateAndNegativeVAreRefused) {
  TempDir dir("ckload");
  const std::string path = dir.file("c.safetensors");
  for (const std::string strategy : {"mixed", "bf16-sr", "fp32"}) {
    SCOPED_TRACE(strategy);
    TinyRun a(strategy);
    const bool f32_weights = a.model->dtype() == DType::kF32;
    // A NaN weight at flat index 7 (in wte, the first tensor).
    {
      std::vector<float> w = a.model->weights_as_f32();
      w[7] = std::nanf("");
      a.model->set_weights_from_f32(w);
      save_checkpoint(path, *a.model, *a.optimizer, a.info());
      EXPECT_THAT(error_of([&] { load_checkpoint(path, *a.model, *a.optimizer); }),
                  HasSubstr(path + ": tensor 'wte' holds a NaN or Inf at index 7"));
      w[7] = -INFINITY;
      a.model->set_weights_from_f32(w);
      save_checkpoint(path, *a.model, *a.optimizer, a.info());
      EXPECT_THAT(error_of([&] { load_checkpoint(path, *a.model, *a.optimizer); }),
                  HasSubstr("tensor 'wte' holds a NaN or Inf at index 7"));
      w[7] = 0.0f;
      a.model->set_weights_from_f32(w);
    }
    std::vector<HostStateBuffer> state = optimizer_state_to_host(*a.optimizer);
    auto set = [&](const std::string& name, size_t i, float value) {
      for (HostStateBuffer& s : state) {
        if (s.name != name) continue;
        if (s.dtype == "F32") {
          std::memcpy(s.bytes.data() + 4 * i, &value, 4);
        } else {
          const uint16_t bits = float_to_bf16_rn(value).bits;
          std::memcpy(s.bytes.data() + 2 * i, &bits, 2);
        }
      }
    };
    set("adam_v", 1234, -1e-3f);
    save_checkpoint(path, *a.model, state, a.info());
    EXPECT_THAT(error_of([&] { load_checkpoint(path, *a.model, *a.optimizer); }),
                HasSubstr(path + ": tensor 'optimizer.adam_v' holds a negative value at index "
                                 "1234 (Adam's second moment must be >= 0)"));
    set("adam_v", 1234, -0.0f);  // minus zero is zero
    set("adam_m", 99, -5.0f);    // m may be negative
    save_checkpoint(path, *a.model, state, a.info());
    EXPECT_NO_THROW(load_checkpoint(path, *a.model, *a.optimizer));
    set("adam_m", 100, INFINITY);
    save_checkpoint(path, *a.model, state, a.info());
    EXPECT_THAT(error_of([&] { load_checkpoint(path, *a.model, *a.optimizer); }),
                HasSubstr("tensor 'optimizer.adam_m' holds a NaN or Inf at index 100"));
    set("adam_m", 100, 0.0f);
    if (!f32_weights && a.strategy.rule.master == MasterKind::kF32) {
      set("master", 3, std::nanf(""));
      save_checkpoint(path, *a.model, state, a.info());
      EXPECT_THAT(error_of([&] { load_checkpoint(path, *a.model, *a.optimizer); }),
                  HasSubstr("tensor 'optimizer.master' holds a NaN or Inf at index 3"));
    }
  }
}

TEST(CheckpointLoad, ResolveRefusesAnythingButAFileOrDirectoryAtOnce) {
  const testing_files::HangGuard guard;
  const testing_files::SpecialFiles files;
  EXPECT_THAT(error_of([&] { resolve_checkpoint(files.fifo()); }),
              HasSubstr("--resume '" + files.fifo() + "': is a FIFO (expected a regular file)"));
  EXPECT_THAT(error_of([&] { resolve_checkpoint("/dev/null"); }),
              HasSubstr("--resume '/dev/null': is a character device"));
  EXPECT_THAT(error_of([&] { resolve_checkpoint(files.missing()); }),
              HasSubstr("--resume '" + files.missing() + "': does not exist"));
  EXPECT_THAT(error_of([&] { resolve_checkpoint(files.directory()); }),
              HasSubstr("no ckpt_*.safetensors in directory " + files.directory()));
  EXPECT_THAT(error_of([&] { read_checkpoint_info(files.fifo()); }),
              HasSubstr("safetensors file '" + files.fifo() + "': is a FIFO"));
}
