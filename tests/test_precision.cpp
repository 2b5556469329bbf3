// Precision strategies (lib/precision.h): the presets of docs/architecture.md's table, the
// "PRESET[:key=value,...]" override syntax, and every way a spec can be wrong.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "lib/precision.h"

namespace {

using namespace srkit;

TEST(Precision, PresetNames) {
  const std::vector<std::string> want = {"fp32",       "mixed",      "bf16", "bf16-sr",
                                         "bf16-kahan", "bf16-rem16", "amp"};
  EXPECT_EQ(strategy_preset_names(), want);
  for (const std::string& name : want) EXPECT_EQ(strategy_from_string(name).name, name);
}

TEST(Precision, BytesPerParamAsInDesign) {
  EXPECT_EQ(strategy_from_string("fp32").bytes_per_param(), 16.0);
  EXPECT_EQ(strategy_from_string("mixed").bytes_per_param(), 16.0);  // 2+4+2+4+4
  EXPECT_EQ(strategy_from_string("bf16").bytes_per_param(), 8.0);
  EXPECT_EQ(strategy_from_string("bf16-sr").bytes_per_param(), 8.0);
  EXPECT_EQ(strategy_from_string("bf16-kahan").bytes_per_param(), 10.0);
  EXPECT_EQ(strategy_from_string("bf16-rem16").bytes_per_param(), 14.0);  // 2+2+2+4+4
}

TEST(Precision, PresetComponents) {
  const PrecisionStrategy fp32 = strategy_from_string("fp32");
  EXPECT_EQ(fp32.rule.weights, DType::kF32);
  EXPECT_EQ(fp32.rule.master, MasterKind::kNone);
  EXPECT_EQ(fp32.rule.m, DType::kF32);
  EXPECT_EQ(fp32.rule.v, DType::kF32);

  const PrecisionStrategy mixed = strategy_from_string("mixed");
  EXPECT_EQ(mixed.rule.weights, DType::kBF16);
  EXPECT_EQ(mixed.rule.master, MasterKind::kF32);
  EXPECT_EQ(mixed.rule.m, DType::kF32);

  const AdamWRule sr = strategy_from_string("bf16-sr").rule;
  EXPECT_EQ(sr.weights, DType::kBF16);
  EXPECT_TRUE(sr.weight_sr);
  EXPECT_FALSE(sr.m_sr || sr.v_sr || sr.kahan);
  EXPECT_EQ(sr.m, DType::kBF16);

  const AdamWRule rn = strategy_from_string("bf16").rule;
  EXPECT_FALSE(rn.weight_sr);

  const AdamWRule kahan = strategy_from_string("bf16-kahan").rule;
  EXPECT_TRUE(kahan.kahan);
  EXPECT_FALSE(kahan.weight_sr);

  const AdamWRule rem16 = strategy_from_string("bf16-rem16").rule;
  EXPECT_EQ(rem16.master, MasterKind::kRem16);
  EXPECT_EQ(rem16.m, DType::kF32);
  EXPECT_EQ(rem16.v, DType::kF32);
}

TEST(Precision, Describe) {
  EXPECT_EQ(strategy_from_string("bf16-sr").describe(),
            "w=bf16 master=none g=bf16 m=bf16(rn) v=bf16(rn) update=sr");
  EXPECT_EQ(strategy_from_string("fp32").describe(),
            "w=f32 master=none g=f32 m=f32 v=f32 update=f32");
  EXPECT_EQ(strategy_from_string("mixed").describe(),
            "w=bf16 master=f32 g=bf16 m=f32 v=f32 update=rn(master)");
  EXPECT_EQ(strategy_from_string("bf16-kahan").describe(),
            "w=bf16 master=none g=bf16 m=bf16(rn) v=bf16(rn) kahan=bf16 update=rn+kahan");
  EXPECT_EQ(strategy_from_string("bf16-rem16").describe(),
            "w=bf16 master=rem16 g=bf16 m=f32 v=f32 update=rn(rem16)");
  EXPECT_EQ(strategy_from_string("bf16:vround=sr").describe(),
            "w=bf16 master=none g=bf16 m=bf16(rn) v=bf16(sr) update=rn");
}

TEST(Precision, Overrides) {
  PrecisionStrategy s = strategy_from_string("bf16-sr:v=f32");
  EXPECT_EQ(s.name, "bf16-sr:v=f32");
  EXPECT_EQ(s.rule.v, DType::kF32);
  EXPECT_EQ(s.bytes_per_param(), 10.0);
  EXPECT_TRUE(s.rule.weight_sr);

  s = strategy_from_string("bf16:update=sr,mround=sr,vround=sr");
  const AdamWRule r = s.rule;
  EXPECT_TRUE(r.weight_sr && r.m_sr && r.v_sr);

  s = strategy_from_string("bf16:kahan=on");
  EXPECT_TRUE(s.rule.kahan);
  EXPECT_EQ(s.bytes_per_param(), 10.0);

  s = strategy_from_string("mixed:master=rem16");  // the bf16-rem16 preset, spelled out
  EXPECT_EQ(s.bytes_per_param(), strategy_from_string("bf16-rem16").bytes_per_param());

  s = strategy_from_string("fp32:m=bf16,v=bf16,mround=sr");
  EXPECT_EQ(s.bytes_per_param(), 12.0);
  EXPECT_TRUE(s.rule.m_sr);

  s = strategy_from_string("bf16-kahan:kahan=off");
  EXPECT_FALSE(s.rule.kahan);

  s = strategy_from_string("mixed:master=none,w=f32");  // keys apply before validation
  EXPECT_EQ(s.rule.weights, DType::kF32);
  EXPECT_EQ(s.rule.master, MasterKind::kNone);
}

// The message names the spec and the problem, on one line.
void expect_rejected(const std::string& spec, const std::string& needle) {
  try {
    strategy_from_string(spec);
    ADD_FAILURE() << spec << ": no exception, expected one mentioning \"" << needle << "\"";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("\"" + spec + "\""), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(Precision, SyntaxErrors) {
  expect_rejected("bf17", "unknown preset \"bf17\"");
  expect_rejected("", "unknown preset \"\"");
  expect_rejected("bf16:", "nothing after ':'");
  expect_rejected("bf16:v", "\"v\" is not key=value");
  expect_rejected("bf16:=f32", "\"=f32\" is not key=value");
  expect_rejected("bf16:v=f32,", "\"\" is not key=value");
  expect_rejected("bf16:speed=fast", "unknown key \"speed\"");
  expect_rejected("bf16:v=f32,v=bf16", "key \"v\" given twice");
  expect_rejected("bf16:w=f16", "w must be f32 or bf16, got \"f16\"");
  expect_rejected("bf16:m=fp32", "m must be f32 or bf16");
  expect_rejected("bf16:v=", "v must be f32 or bf16, got \"\"");
  expect_rejected("bf16:master=yes", "master must be none, f32 or rem16");
  expect_rejected("bf16:update=stochastic", "update must be rn or sr");
  expect_rejected("bf16:mround=up", "mround must be rn or sr");
  expect_rejected("bf16:vround=RN", "vround must be rn or sr");
  expect_rejected("bf16:kahan=1", "kahan must be on or off");
}

TEST(Precision, MeaninglessCombinations) {
  expect_rejected("fp32:master=f32", "f32 weights cannot have a master");
  expect_rejected("fp32:kahan=on", "f32 weights cannot have a Kahan");
  expect_rejected("fp32:update=sr", "update=sr does not apply");
  expect_rejected("mixed:kahan=on", "Kahan compensation is meaningless with master weights");
  expect_rejected("bf16-rem16:kahan=on", "meaningless with master");
  expect_rejected("mixed:update=sr", "rounded to nearest from it");
  expect_rejected("bf16-sr:kahan=on", "update=rn");
  expect_rejected("bf16:m=f32,mround=sr", "mround=sr needs m=bf16");
  expect_rejected("bf16-rem16:vround=sr", "vround=sr needs v=bf16");
  expect_rejected("fp32:g=bf16", "g=bf16 needs w=bf16");
  expect_rejected("amp:g=bf16", "g=bf16 needs w=bf16");
  expect_rejected("bf16:g=f16", "g must be f32 or bf16, got \"f16\"");
}

// g=f32: bf16 weights with fp32 gradients, 2 more bytes per parameter; the
// gradients follow a w= override unless g= is given.
TEST(Precision, Fp32GradientsOfBf16Weights) {
  const PrecisionStrategy s = strategy_from_string("bf16-sr:g=f32");
  EXPECT_EQ(s.weights(), DType::kBF16);
  EXPECT_EQ(s.grads(), DType::kF32);
  EXPECT_EQ(s.compute, DType::kBF16);
  EXPECT_FALSE(s.casts_for_compute());
  EXPECT_EQ(s.bytes_per_param(), 10.0);
  EXPECT_EQ(s.describe(), "w=bf16 master=none g=f32 m=bf16(rn) v=bf16(rn) update=sr");
  EXPECT_EQ(adamw_array_bytes(s.rule).grads, 4u);
  EXPECT_EQ(strategy_from_string("mixed:g=f32").bytes_per_param(), 18.0);
  EXPECT_EQ(strategy_from_string("bf16:g=bf16").grads(), DType::kBF16);
  for (const std::string& name : strategy_preset_names()) {
    const PrecisionStrategy p = strategy_from_string(name);
    EXPECT_EQ(p.grads(), p.weights()) << name;
  }
  EXPECT_EQ(strategy_from_string("bf16:w=f32").grads(), DType::kF32);
  EXPECT_EQ(strategy_from_string("fp32:w=bf16").grads(), DType::kBF16);
  EXPECT_EQ(strategy_from_string("fp32:w=bf16,g=f32").grads(), DType::kF32);
  EXPECT_EQ(strategy_from_string("fp32:g=f32").bytes_per_param(), 16.0);  // already fp32
}

TEST(Precision, ValidateRejectsInconsistentHandBuiltStrategy) {
  PrecisionStrategy s = strategy_from_string("bf16-sr");
  s.name = "custom";
  EXPECT_NO_THROW(s.validate());
  s.rule.master = MasterKind::kF32;  // SR weights with a master
  EXPECT_THROW(s.validate(), std::invalid_argument);
}

// PyTorch-AMP-style O1: the fp32 strategy's storage, bf16 compute; the compute
// copies of weights and gradients are transient bytes, not state.
TEST(Precision, AmpIsFp32StorageWithBf16Compute) {
  const PrecisionStrategy amp = strategy_from_string("amp");
  const PrecisionStrategy fp32 = strategy_from_string("fp32");
  EXPECT_EQ(amp.rule.weights, DType::kF32);
  EXPECT_EQ(amp.rule.master, MasterKind::kNone);
  EXPECT_EQ(amp.rule.m, DType::kF32);
  EXPECT_EQ(amp.compute, DType::kBF16);
  EXPECT_TRUE(amp.casts_for_compute());
  EXPECT_FALSE(fp32.casts_for_compute());
  EXPECT_EQ(amp.bytes_per_param(), 16.0);
  EXPECT_EQ(amp.transient_bytes_per_param(), 4.0);
  EXPECT_EQ(fp32.transient_bytes_per_param(), 0.0);
  EXPECT_EQ(amp.describe(), fp32.describe() + " compute=bf16");
  // amp spelled out, and the compute dtype following a w= override.
  const PrecisionStrategy spelled = strategy_from_string("fp32:compute=bf16");
  EXPECT_EQ(spelled.compute, DType::kBF16);
  EXPECT_EQ(spelled.describe(), amp.describe());
  EXPECT_EQ(strategy_from_string("mixed:w=f32,master=none").compute, DType::kF32);
  EXPECT_EQ(strategy_from_string("bf16-sr").compute, DType::kBF16);
  expect_rejected("bf16:compute=f32", "compute=f32 needs w=f32");
  expect_rejected("amp:compute=f16", "compute must be f32 or bf16");
}

// Found by fuzzing (tests/fuzz/corpus/strategy_spec/control_characters): the
// spec is quoted in the error, and a newline in it broke the one-line message.
TEST(Precision, ControlCharactersInASpecKeepTheErrorOneLine) {
  for (const char* spec : {"bf16\nsr", "bf16:w=\x01\n", "bf16:\tk\r=v"}) {
    try {
      strategy_from_string(spec);
      ADD_FAILURE() << spec;
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find_first_of("\n\r\t\x01"), std::string::npos) << msg;
    }
  }
  try {
    strategy_from_string("bf16\nsr");
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("precision \"bf16\\nsr\": unknown preset", 0), 0u)
        << e.what();
  }
}

}  // namespace
