// sr-export: an srkit training checkpoint -> a Hugging Face GPT-2 folder
// (config.json + model.safetensors) that transformers' GPT2LMHeadModel loads
// unchanged (docs/interop.md).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "lib/checkpoint/checkpoint_dir.h"
#include "lib/checkpoint/hf_gpt2.h"
#include "lib/checkpoint/hf_gpt2_config.h"
#include "lib/model/param_layout.h"
#include "lib/train/checkpoint_io.h"

namespace {

namespace fs = std::filesystem;

struct Options {
  std::string hf_dir;
  std::string checkpoint;
  std::string dtype;  // empty: the checkpoint's weight dtype
};

// A checkpoint file, or the latest ckpt_*.safetensors of a run directory.
std::string checkpoint_file(const std::string& file_or_dir) {
  if (!fs::exists(file_or_dir)) throw std::runtime_error("CKPT " + file_or_dir + " does not exist");
  if (!fs::is_directory(file_or_dir)) return file_or_dir;
  const std::string latest = srkit::latest_checkpoint(file_or_dir);
  if (latest.empty()) {
    throw std::runtime_error("CKPT " + file_or_dir + " is a directory without ckpt_*.safetensors");
  }
  return latest;
}

int run(const Options& opt) {
  const std::string path = checkpoint_file(opt.checkpoint);
  const srkit::CheckpointWeights w = srkit::read_checkpoint_weights(path);
  const srkit::DType out = opt.dtype.empty()    ? w.dtype
                           : opt.dtype == "f32" ? srkit::DType::kF32
                                                : srkit::DType::kBF16;
  srkit::save_hf_gpt2(opt.hf_dir, w.model, w.flat.data(), w.dtype, out);
  std::printf("sr-export: %s (step %llu, %s, %s weights) -> %s, %s (%.2fM parameters, %s)\n",
              path.c_str(), static_cast<unsigned long long>(w.info.step), w.info.strategy.c_str(),
              srkit::dtype_name(w.dtype), srkit::hf_weights_path(opt.hf_dir).c_str(),
              srkit::kHfConfigFile, double(srkit::ParamLayout(w.model).num_params()) / 1e6,
              srkit::dtype_name(out));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "sr-export: write an srkit checkpoint as a Hugging Face GPT-2 folder (config.json + "
      "model.safetensors) that transformers' GPT2LMHeadModel.from_pretrained(DIR) loads.\n"
      "Weights only: the optimizer state (AdamW moments, fp32 master weights, Kahan "
      "compensation) is not exported; a run with a master copy exports the weights its forward "
      "pass uses. The padded vocabulary rows are dropped (vocab_size is the real vocabulary)."};
  app.set_version_flag("--version", std::string("sr-export ") + SRKIT_VERSION);
  Options opt;
  app.add_option("--hf", opt.hf_dir,
                 "output folder (created if missing; config.json and "
                 "model.safetensors in it are replaced)")
      ->required()
      ->type_name("DIR");
  app.add_option("checkpoint", opt.checkpoint,
                 "srkit checkpoint file, or a run's checkpoint directory (its latest checkpoint)")
      ->required()
      ->type_name("CKPT");
  app.add_option("--dtype", opt.dtype,
                 "stored dtype: bf16 or f32 (default: the checkpoint's weight dtype; f32 -> bf16 "
                 "rounds to nearest even)")
      ->check(CLI::IsMember({"bf16", "f32"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "sr-export: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sr-export: %s\n", e.what());
    return 2;
  }
}
