#include "lib/bench/sweep_cell.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "lib/train/trainer.h"
#include "lib/util/atomic_file.h"

namespace srkit {
namespace {

nlohmann::json curve_json(const std::vector<std::pair<uint64_t, double>>& curve) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [step, loss] : curve) out.push_back({step, loss});
  return out;
}

std::vector<std::pair<uint64_t, double>> curve_from(const nlohmann::json& j) {
  std::vector<std::pair<uint64_t, double>> out;
  for (const nlohmann::json& p : j)
    out.emplace_back(p.at(0).get<uint64_t>(), p.at(1).get<double>());
  return out;
}

// The step and eval records of the cell's JSONL log: its loss curves.
void read_curves(const std::string& log_file, SweepCellResult& r) {
  std::ifstream in(log_file);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    const std::string type = j.value("type", "");
    if (type == "step" && j.contains("loss") && j["loss"].is_number()) {
      r.train_curve.emplace_back(j["step"].get<uint64_t>(), j["loss"].get<double>());
    } else if (type == "eval" && j.contains("val_loss") && j["val_loss"].is_number()) {
      r.val_curve.emplace_back(j["step"].get<uint64_t>(), j["val_loss"].get<double>());
    }
  }
}

}  // namespace

nlohmann::json SweepCellResult::to_json() const {
  return {{"strategy", strategy},
          {"lr", lr},
          {"seed", seed},
          {"status", status},
          {"diverged_step", diverged_step},
          {"message", message},
          {"val_loss", val_loss},
          {"train_loss", train_loss},
          {"steps_done", steps_done},
          {"tokens", tokens},
          {"seconds", seconds},
          {"val_curve", curve_json(val_curve)},
          {"train_curve", curve_json(train_curve)},
          {"config", config},
          {"environment", environment},
          {"carried_from", carried_from}};
}

SweepCellResult SweepCellResult::from_json(const nlohmann::json& j) {
  SweepCellResult r;
  r.strategy = j.at("strategy").get<std::string>();
  r.lr = j.at("lr").get<double>();
  r.seed = j.at("seed").get<uint64_t>();
  r.status = j.at("status").get<std::string>();
  if (r.status != "ok" && r.status != "diverged") {
    throw std::runtime_error("status \"" + r.status + "\" is neither ok nor diverged");
  }
  r.diverged_step = j.at("diverged_step").get<uint64_t>();
  r.message = j.at("message").get<std::string>();
  r.val_loss = j.at("val_loss").get<double>();
  r.train_loss = j.at("train_loss").get<double>();
  r.steps_done = j.at("steps_done").get<uint64_t>();
  r.tokens = j.at("tokens").get<uint64_t>();
  r.seconds = j.at("seconds").get<double>();
  r.val_curve = curve_from(j.at("val_curve"));
  r.train_curve = curve_from(j.at("train_curve"));
  r.config = j.at("config");
  r.environment = j.value("environment", nlohmann::json());
  r.carried_from = j.value("carried_from", std::string());
  return r;
}

nlohmann::json portable_config(const nlohmann::json& config) {
  nlohmann::json c = config;
  for (const char* key : {"data", "val_data"}) {
    if (c.contains(key) && c[key].is_string())
      c[key] = std::filesystem::path(c[key].get<std::string>()).filename().string();
  }
  return c;
}

uint64_t diverged_step_of(const std::string& message) {
  // The number after the first "at step " (the trainer's divergence message); 0 if none.
  static constexpr std::string_view kAtStep = "at step ";
  const size_t at = message.find(kAtStep);
  if (at == std::string::npos) return 0;
  uint64_t step = 0;
  size_t i = at + kAtStep.size(), digits = 0;
  for (; i < message.size() && message[i] >= '0' && message[i] <= '9'; ++i, ++digits) {
    if (step > (UINT64_MAX - 9) / 10) return 0;
    step = step * 10 + uint64_t(message[i] - '0');
  }
  return digits ? step : 0;
}

bool run_sweep_cell(const SweepOptions& options, const SweepCell& cell) {
  const TrainConfig config = cell_config(options, cell);
  std::filesystem::create_directories(cell.dir);
  SweepCellResult r;
  r.strategy = cell.strategy.name;
  r.lr = cell.lr;
  r.seed = cell.seed;
  r.config = config.to_json();
  r.environment = options.environment;
  const auto start = std::chrono::steady_clock::now();
  try {
    const RunSummary s = Trainer(config).run();
    if (s.interrupted) return false;
    r.val_loss = s.val_loss;
    r.train_loss = s.train_loss;
    r.steps_done = s.steps_done;
  } catch (const TrainingDiverged& e) {
    r.status = "diverged";
    r.message = e.what();
    r.diverged_step = diverged_step_of(r.message);
    r.steps_done = r.diverged_step > 0 ? r.diverged_step - 1 : 0;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.tokens = r.steps_done * config.tokens_per_step();
  read_curves(cell.log_file(), r);
  const std::string text = r.to_json().dump(1) + "\n";
  write_file_atomic(cell.result_file(), text.data(), text.size());
  return true;
}

bool read_cell_result(const SweepOptions& options, const SweepCell& cell, SweepCellResult& out) {
  const std::string path = cell.result_file();
  if (!std::filesystem::exists(path)) return false;
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  try {
    if (j.is_discarded()) throw std::runtime_error("not JSON");
    out = SweepCellResult::from_json(j);
  } catch (const std::exception& e) {
    // Bad input, not a failed run (exit 2): results are written atomically, so
    // this file was damaged or put there by something else.
    throw std::invalid_argument(path + ": not a sweep cell result (" + e.what() +
                                "); delete it to run the cell again");
  }
  const nlohmann::json expected = portable_config(cell_config(options, cell).to_json());
  if (portable_config(out.config) != expected) {
    throw std::runtime_error(path + ": written by a sweep with another configuration (" +
                             out.config.dump() + ", this sweep: " + expected.dump() +
                             "); use another --out");
  }
  return true;
}

}  // namespace srkit
