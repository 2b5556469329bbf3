// sr-bench's library parts with known answers: the FLOP count, the datasheet
// peak table, list flags, the comparison against mixed, the tables' shape,
// and the process-memory probe.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/bench/flops.h"
#include "lib/bench/list_args.h"
#include "lib/bench/peak_rate.h"
#include "lib/bench/process_memory.h"
#include "lib/bench/train_matrix.h"
#include "lib/bench/train_report.h"
#include "lib/model/param_layout.h"

namespace srkit {
namespace {

TEST(BenchFlops, KnownAnswer) {
  // tiny: L=2, C=64, 120576 parameters; B=2, T=32 (64 tokens).
  const GPTConfig c = gpt_preset("tiny");
  ASSERT_EQ(ParamLayout(c).num_params(), 120576u);
  const StepFlops f = train_step_flops_split(c, 2, 32);
  EXPECT_DOUBLE_EQ(f.dense, 6.0 * 120576 * 64);
  EXPECT_DOUBLE_EQ(f.attention, 12.0 * 2 * 64 * 32 * 64);  // 12 L (BT) T C
  EXPECT_DOUBLE_EQ(train_step_flops(c, 2, 32), 46301184.0 + 3145728.0);
}

TEST(BenchPeak, DatasheetTable) {
  const DType bf = DType::kBF16, f32 = DType::kF32;
  EXPECT_DOUBLE_EQ(*datasheet_gflops("NVIDIA H100 80GB HBM3", bf), 989e3);
  EXPECT_DOUBLE_EQ(*datasheet_gflops("NVIDIA H200", bf), 989e3);
  EXPECT_DOUBLE_EQ(*datasheet_gflops("NVIDIA H100 PCIe", bf), 756e3);
  EXPECT_DOUBLE_EQ(*datasheet_gflops("NVIDIA A100-SXM4-80GB", bf), 312e3);
  EXPECT_DOUBLE_EQ(*datasheet_gflops("NVIDIA H100 80GB HBM3", f32), 67e3);
  EXPECT_DOUBLE_EQ(*datasheet_gflops("NVIDIA H200", f32), 67e3);
  EXPECT_DOUBLE_EQ(*datasheet_gflops("NVIDIA H100 PCIe", f32), 51.2e3);
  EXPECT_DOUBLE_EQ(*datasheet_gflops("NVIDIA A100-SXM4-80GB", f32), 19.5e3);
  EXPECT_FALSE(datasheet_gflops("NVIDIA GeForce GTX 1080", bf).has_value());
  auto backend = make_cpu_backend(1);
  EXPECT_DOUBLE_EQ(device_peak(*backend, 123.0, bf).gflops, 123.0);  // the override wins
  EXPECT_DOUBLE_EQ(device_peak(*backend, 123.0, f32).gflops, 123.0);
}

TEST(BenchPeak, GemmProbesReportAPositiveRateNamingTheirGemm) {
  const PeakRate f = measure_gemm_peak(DType::kF32, 64, 3);
  EXPECT_GT(f.gflops, 0.0);
  EXPECT_NE(f.source.find("sgemm 64x64x64"), std::string::npos) << f.source;
  const PeakRate b = measure_gemm_peak(DType::kBF16, 64, 3);
  EXPECT_GT(b.gflops, 0.0);
  EXPECT_NE(b.source.find("bf16 GEMM 64x64x64"), std::string::npos) << b.source;
}

TEST(BenchLists, SplitParseAndNameTheFlag) {
  EXPECT_EQ(split_list("a,b", "--x"), (std::vector<std::string>{"a", "b"}));
  EXPECT_THROW(split_list("a,,b", "--x"), std::invalid_argument);
  EXPECT_THROW(split_list("", "--x"), std::invalid_argument);
  // Overrides of one strategy stay together; a new preset starts a new item.
  std::vector<std::string> names;
  for (const PrecisionStrategy& s :
       parse_strategy_list("mixed,bf16-sr:m=f32,v=f32,bf16", "--strategies")) {
    names.push_back(s.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"mixed", "bf16-sr:m=f32,v=f32", "bf16"}));
  EXPECT_EQ(parse_int_list("1,8,32", "--batches", 1, 64), (std::vector<int>{1, 8, 32}));
  for (const char* bad : {"0", "x", "2,", "65", "1.5"}) {
    try {
      parse_int_list(bad, "--batches", 1, 64);
      ADD_FAILURE() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--batches", 0), 0u) << e.what();
    }
  }
  try {
    parse_strategy_list("mixed,bf17", "--strategies");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bf17"), std::string::npos);
  }
  try {
    parse_model_list("tiny,gpt5", "--models");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpt5"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("neo-6.7b"), std::string::npos);  // lists the presets
  }
}

CellResult cell(const std::string& strategy, int batch, double ms, size_t peak) {
  CellResult c;
  c.model = "tiny";
  c.strategy = strategy;
  c.batch = batch;
  c.seq_len = 32;
  c.ms_median = c.ms_min = c.ms_max = ms;
  c.memory.total_peak = peak;
  return c;
}

TEST(BenchCompare, RatiosAgainstMixedOfTheSameModelAndBatch) {
  std::vector<CellResult> cells = {cell("mixed", 2, 10.0, 1000), cell("bf16-sr", 2, 8.0, 600),
                                   cell("bf16-sr", 4, 8.0, 600), cell("mixed", 8, 10.0, 1000),
                                   cell("bf16-sr", 8, 5.0, 500)};
  cells[3].status = "OOM";  // no reference for batch 8
  compare_with_mixed(cells);
  EXPECT_DOUBLE_EQ(cells[0].speedup_vs_mixed, 1.0);
  EXPECT_DOUBLE_EQ(cells[1].speedup_vs_mixed, 1.25);
  EXPECT_DOUBLE_EQ(cells[1].memory_vs_mixed, 0.6);
  EXPECT_LT(cells[2].speedup_vs_mixed, 0.0);  // no mixed at batch 4
  EXPECT_LT(cells[3].speedup_vs_mixed, 0.0);
  EXPECT_LT(cells[4].speedup_vs_mixed, 0.0);
}

int count(const std::string& s, char ch) { return int(std::count(s.begin(), s.end(), ch)); }

TEST(BenchReport, OomRowsKeepTheTableShapeAndSummariesCountCells) {
  TrainMatrixResult r;
  r.options.strategies = {strategy_from_string("mixed"), strategy_from_string("bf16-sr")};
  r.cells = {cell("mixed", 2, 10.0, 1000), cell("bf16-sr", 2, 8.0, 600)};
  r.cells[0].status = "OOM";
  r.cells[0].message = "cpu: out of memory";
  compare_with_mixed(r.cells);
  const std::string table = train_markdown_table(r);
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < table.size()) {
    const size_t end = table.find('\n', start);
    lines.push_back(table.substr(start, end - start));
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), 4u);  // header, rule, two cells
  for (const std::string& l : lines) EXPECT_EQ(count(l, '|'), count(lines[0], '|')) << l;
  EXPECT_NE(lines[2].find("| OOM |"), std::string::npos);
  EXPECT_EQ(count(train_phases_table(r), '\n'), 4);
  const std::vector<std::string> summaries = train_strategy_summaries(r);
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries[0].rfind("mixed: 0/1 cells ran", 0), 0u) << summaries[0];
  EXPECT_EQ(summaries[1].rfind("bf16-sr: 1/1 cells ran; 8 state bytes/param", 0), 0u)
      << summaries[1];
  EXPECT_EQ(count(train_csv(r), '\n'), 3);
  const nlohmann::json j = train_json(r);
  EXPECT_EQ(j["cells"][0]["status"], "OOM");
  EXPECT_EQ(j["cells"][0]["message"], "cpu: out of memory");
  EXPECT_TRUE(j["cells"][1]["speedup_vs_mixed"].is_null());
}

TEST(BenchProcessMemory, PeakRssCoversWhatWasTouched) {
  reset_peak_rss();  // may be refused; the peak is then only larger
  const size_t bytes = size_t(64) << 20;
  std::vector<char> block(bytes, 1);  // touched: resident
  EXPECT_GE(peak_rss_bytes(), bytes);
  EXPECT_EQ(block[bytes - 1], 1);
}

}  // namespace
}  // namespace srkit
