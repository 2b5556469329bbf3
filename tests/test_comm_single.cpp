// The single-process communicator, the rank-order reduction rule every CPU
// communicator uses, launcher detection and the communicator factory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "lib/comm/communicator.h"

namespace srkit {
namespace {

uint32_t bits(float f) { return float_as_bits(f); }

// Clears every launcher variable for the scope of a test (the suite may itself
// run under srun or mpirun) and restores them afterwards.
class LauncherEnv {
 public:
  LauncherEnv() {
    for (const char* var : kVars) {
      if (const char* v = std::getenv(var)) saved_[var] = v;
      unsetenv(var);
    }
  }
  ~LauncherEnv() {
    for (const char* var : kVars) unsetenv(var);
    for (const auto& [var, value] : saved_) setenv(var.c_str(), value.c_str(), 1);
  }
  void set(const char* var, const char* value) { setenv(var, value, 1); }

 private:
  static constexpr const char* kVars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                                          "SLURM_STEP_NUM_TASKS"};
  std::map<std::string, std::string> saved_;
};

// Awkward values: signed zero, subnormal, NaN with payload, infinity, large and tiny.
std::vector<float> awkward_f32() {
  return {0.0f,     -0.0f,       1e-40f, -3.5f, 1e30f, std::nanf("0x1234"),
          INFINITY, 1.0f / 3.0f, 65504,  -7e-8f};
}

std::vector<bf16> awkward_bf16() {
  std::vector<bf16> out;
  for (uint16_t b : {0x0000, 0x8000, 0x0001, 0xc060, 0x7f7f, 0x7fc1, 0x7f80, 0x3eab, 0xff80})
    out.push_back(bf16{b});
  return out;
}

TEST(SingleCommunicator, Identity) {
  auto comm = make_single_communicator();
  EXPECT_EQ(comm->name(), "single");
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_EQ(comm->local_rank(), 0);
}

TEST(SingleCommunicator, AllReduceLeavesEveryBitAlone) {
  auto comm = make_single_communicator();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
    std::vector<float> f = awkward_f32();
    const std::vector<float> f0 = f;
    comm->all_reduce(f.data(), f.size(), DType::kF32, op);
    EXPECT_EQ(std::memcmp(f.data(), f0.data(), f.size() * sizeof(float)), 0);
    std::vector<bf16> h = awkward_bf16();
    const std::vector<bf16> h0 = h;
    comm->all_reduce(h.data(), h.size(), DType::kBF16, op);
    EXPECT_EQ(std::memcmp(h.data(), h0.data(), h.size() * sizeof(bf16)), 0);
  }
}

TEST(SingleCommunicator, ReduceScatterAndAllGatherCopy) {
  auto comm = make_single_communicator();
  const std::vector<float> send = awkward_f32();
  std::vector<float> recv(send.size(), 7.0f);
  comm->reduce_scatter(send.data(), recv.data(), send.size(), DType::kF32, ReduceOp::kMean);
  EXPECT_EQ(std::memcmp(recv.data(), send.data(), send.size() * sizeof(float)), 0);

  const std::vector<bf16> hsend = awkward_bf16();
  std::vector<bf16> hrecv(hsend.size(), bf16{0x1234});
  comm->all_gather(hsend.data(), hrecv.data(), hsend.size(), DType::kBF16);
  EXPECT_EQ(std::memcmp(hrecv.data(), hsend.data(), hsend.size() * sizeof(bf16)), 0);

  // In place (send == recv), as ZeRO-1 calls it on the weight buffer.
  std::vector<bf16> inplace = hsend;
  comm->all_gather(inplace.data(), inplace.data(), inplace.size(), DType::kBF16);
  EXPECT_EQ(std::memcmp(inplace.data(), hsend.data(), hsend.size() * sizeof(bf16)), 0);
}

TEST(SingleCommunicator, BroadcastBarrierCheckSame) {
  auto comm = make_single_communicator();
  std::string payload = "unchanged";
  comm->broadcast(payload.data(), payload.size(), 0);
  EXPECT_EQ(payload, "unchanged");
  EXPECT_THROW(comm->broadcast(payload.data(), payload.size(), 1), std::invalid_argument);
  comm->barrier();
  EXPECT_NO_THROW(comm->check_same_on_all_ranks("model", "{\"n_layer\": 2}"));
}

TEST(SingleCommunicator, CommSecondsAccumulates) {
  auto comm = make_single_communicator();
  EXPECT_EQ(comm->comm_seconds(), 0.0);
  std::vector<float> a(1 << 16, 1.0f), b(1 << 16);
  comm->all_gather(a.data(), b.data(), a.size(), DType::kF32);
  const double after_one = comm->comm_seconds();
  EXPECT_GE(after_one, 0.0);
  comm->all_gather(a.data(), b.data(), a.size(), DType::kF32);
  EXPECT_GE(comm->comm_seconds(), after_one);
}

// ---- the rank-order reduction rule ------------------------------------------

TEST(ReduceInRankOrder, SumsInRankOrderNotAnyOther) {
  // 1 + 2^-24 is a tie that rounds back to 1, so the order of the three adds
  // decides the answer: ((1 + e) + e) = 1 but (e + e) + 1 = 1 + 2^-23.
  const float e = std::ldexp(1.0f, -24);
  const float a[] = {1.0f}, b[] = {e}, c[] = {e};
  float out = -1.0f;
  const void* rank_order[] = {a, b, c};
  reduce_in_rank_order(rank_order, 3, &out, 1, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(bits(out), bits(1.0f));
  const void* reversed[] = {c, b, a};
  reduce_in_rank_order(reversed, 3, &out, 1, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(bits(out), bits(1.0f + std::ldexp(1.0f, -23)));
}

TEST(ReduceInRankOrder, Bf16WidenedAndRoundedOnce) {
  // 1 + 2^-8 is half a bf16 ulp above 1: rounding after each add (ties to even)
  // would give 1 twice over; fp32 accumulation gives 1 + 2^-7 exactly.
  const bf16 one{0x3f80}, eighth_ulp{0x3b80};  // 1.0, 2^-8
  ASSERT_EQ(bf16_to_float(eighth_ulp), std::ldexp(1.0f, -8));
  const bf16 a[] = {one}, b[] = {eighth_ulp}, c[] = {eighth_ulp};
  const void* parts[] = {a, b, c};
  bf16 out{0};
  reduce_in_rank_order(parts, 3, &out, 1, DType::kBF16, ReduceOp::kSum);
  EXPECT_EQ(out.bits, 0x3f81);  // 1 + 2^-7
  const bf16 pairwise = float_to_bf16_rn(
      bf16_to_float(float_to_bf16_rn(bf16_to_float(one) + bf16_to_float(eighth_ulp))) +
      bf16_to_float(eighth_ulp));
  EXPECT_EQ(pairwise.bits, 0x3f80) << "the example must separate the two roundings";
}

TEST(ReduceInRankOrder, MeanMultipliesByFp32Reciprocal) {
  // Sum 5 over W = 3: 5 * fl(1/3) = 0x3fd55556 while 5 / 3 = 0x3fd55555.
  const float a[] = {1.0f}, b[] = {2.0f}, c[] = {2.0f};
  const void* parts[] = {a, b, c};
  float out = 0.0f;
  reduce_in_rank_order(parts, 3, &out, 1, DType::kF32, ReduceOp::kMean);
  EXPECT_EQ(bits(out), 0x3fd55556u);
  EXPECT_NE(bits(5.0f / 3.0f), 0x3fd55556u) << "the example must separate the two formulas";
  // bf16 mean: the fp32 value above, rounded once.
  const bf16 ha[] = {float_to_bf16_rn(1.0f)}, hb[] = {float_to_bf16_rn(2.0f)};
  const void* hparts[] = {ha, hb, hb};
  bf16 hout{0};
  reduce_in_rank_order(hparts, 3, &hout, 1, DType::kBF16, ReduceOp::kMean);
  EXPECT_EQ(hout.bits, float_to_bf16_rn(bits_as_float(0x3fd55556u)).bits);
}

// An independent element-by-element reference over many elements (several tiles),
// with the output aliasing one of the parts.
TEST(ReduceInRankOrder, MatchesScalarReferenceAcrossTilesInPlace) {
  const int W = 5;
  const size_t n = 3001;
  std::vector<std::vector<float>> f(W, std::vector<float>(n));
  std::vector<std::vector<bf16>> h(W, std::vector<bf16>(n));
  uint64_t state = 12345;
  for (int q = 0; q < W; ++q) {
    for (size_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float x = std::ldexp(float((state >> 40) & 0xffffff) / float(1 << 24) - 0.5f,
                                 int((state >> 20) % 41) - 20);
      f[q][i] = x;
      h[q][i] = float_to_bf16_rn(x);
    }
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
    std::vector<float> want_f(n);
    std::vector<bf16> want_h(n);
    for (size_t i = 0; i < n; ++i) {
      float sf = f[0][i], sh = bf16_to_float(h[0][i]);
      for (int q = 1; q < W; ++q) {
        sf = sf + f[q][i];
        sh = sh + bf16_to_float(h[q][i]);
      }
      if (op == ReduceOp::kMean) {
        sf = sf * (1.0f / float(W));
        sh = sh * (1.0f / float(W));
      }
      want_f[i] = sf;
      want_h[i] = float_to_bf16_rn(sh);
    }
    auto fparts = f;  // output written over part 2
    std::vector<const void*> fp;
    for (auto& v : fparts) fp.push_back(v.data());
    reduce_in_rank_order(fp.data(), W, fparts[2].data(), n, DType::kF32, op);
    EXPECT_EQ(std::memcmp(fparts[2].data(), want_f.data(), n * sizeof(float)), 0);
    auto hparts = h;  // output written over part 0
    std::vector<const void*> hp;
    for (auto& v : hparts) hp.push_back(v.data());
    reduce_in_rank_order(hp.data(), W, hparts[0].data(), n, DType::kBF16, op);
    EXPECT_EQ(std::memcmp(hparts[0].data(), want_h.data(), n * sizeof(bf16)), 0);
  }
}

TEST(ReduceInRankOrder, RejectsNoParts) {
  float out = 0.0f;
  EXPECT_THROW(reduce_in_rank_order(nullptr, 0, &out, 1, DType::kF32, ReduceOp::kSum),
               std::invalid_argument);
}

// ---- launcher detection and the factory -------------------------------------

TEST(LauncherWorldSize, ReadsTheLauncherVariables) {
  LauncherEnv env;
  std::string source = "stale";
  EXPECT_EQ(launcher_world_size(&source), 1);
  EXPECT_EQ(source, "");
  env.set("SLURM_STEP_NUM_TASKS", "8");
  EXPECT_EQ(launcher_world_size(&source), 8);
  EXPECT_EQ(source, "SLURM_STEP_NUM_TASKS");
  env.set("PMI_SIZE", "3");
  EXPECT_EQ(launcher_world_size(&source), 3);
  EXPECT_EQ(source, "PMI_SIZE");
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(launcher_world_size(&source), 2);
  EXPECT_EQ(source, "OMPI_COMM_WORLD_SIZE");
}

TEST(LauncherWorldSize, RejectsGarbage) {
  for (const char* bad : {"zero", "0", "-2", "4x"}) {
    LauncherEnv env;
    env.set("PMI_SIZE", bad);
    try {
      launcher_world_size();
      ADD_FAILURE() << "accepted PMI_SIZE=" << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("PMI_SIZE"), std::string::npos) << e.what();
    }
  }
}

TEST(MakeCommunicator, AutoWithoutLauncherIsSingle) {
  LauncherEnv env;
  EXPECT_EQ(make_communicator("auto", 300)->name(), "single");
  EXPECT_EQ(make_communicator("single", 300)->name(), "single");
  env.set("OMPI_COMM_WORLD_SIZE", "1");  // mpirun -np 1 needs no MPI either
  EXPECT_EQ(make_communicator("auto", 300)->name(), "single");
}

TEST(MakeCommunicator, UnknownKindNamesIt) {
  try {
    make_communicator("gloo", 300);
    FAIL() << "accepted an unknown kind";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'gloo'"), std::string::npos) << e.what();
  }
}

#if !defined(SRKIT_HAVE_MPI)
TEST(MakeCommunicator, MpiRequestedButNotBuilt) {
  LauncherEnv env;
  try {
    make_communicator("mpi", 300);
    FAIL() << "'mpi' must throw without MPI";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("without MPI"), std::string::npos) << e.what();
  }
  // A launcher with several ranks and no MPI would mean W independent runs.
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  try {
    make_communicator("auto", 300);
    FAIL() << "'auto' under a 4-rank launcher must throw without MPI";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("OMPI_COMM_WORLD_SIZE"), std::string::npos) << e.what();
  }
}
#endif

#if !(defined(SRKIT_HAVE_MPI) && defined(SRKIT_HAVE_CUDA))
TEST(MakeCommunicator, NcclNeedsCudaAndMpi) {
  EXPECT_THROW(make_communicator("nccl", 300), std::runtime_error);
}
#endif

}  // namespace
}  // namespace srkit
