#include "lib/charts/compare_chart.h"

#include <stdexcept>

#include "lib/util/format.h"

namespace srkit {
namespace {

// Display names of the memory categories, in MemCategory order.
constexpr const char* kCategoryNames[kNumMemCategories] = {
    "weights", "master", "grads", "optimizer state", "activations", "scratch"};

double mib(size_t bytes) { return double(bytes) / 1048576.0; }

svg::LineChart loss_chart(const std::string& title, const std::string& y_label) {
  svg::LineChart c;
  c.title = title;
  c.x_label = "tokens";
  c.y_label = y_label;
  c.height = 420;
  return c;
}

svg::BarChart memory_chart(const std::vector<CompareCurves>& runs) {
  svg::BarChart c;
  c.title = "peak memory by category";
  c.value_label = "MiB (each category at its own peak, stacked)";
  c.stacked = true;
  for (const CompareCurves& r : runs) c.categories.push_back(r.strategy);
  for (int k = 0; k < kNumMemCategories; ++k) {
    svg::BarSeries s{kCategoryNames[k], {}, {}};
    for (const CompareCurves& r : runs) s.values.push_back(mib(r.peak_bytes[k]));
    c.series.push_back(std::move(s));
  }
  // The stack's sum at the end of its last segment.
  for (const CompareCurves& r : runs) {
    size_t sum = 0;
    for (size_t b : r.peak_bytes) sum += b;
    c.series.back().notes.push_back(strprintf("%.1f MiB", mib(sum)));
  }
  return c;
}

}  // namespace

CompareCurves compare_curves(const std::string& strategy, const audit::RunLog& log,
                             uint64_t tokens_per_step, const MemoryStats& memory) {
  CompareCurves c;
  c.strategy = strategy;
  for (const audit::StepRecord& s : log.steps) {
    c.step_tokens.push_back(double(s.step) * double(tokens_per_step));
    c.step_loss.push_back(s.loss);
  }
  for (const audit::EvalRecord& e : log.evals) {
    c.eval_tokens.push_back(double(e.step) * double(tokens_per_step));
    c.eval_loss.push_back(e.val_loss);
  }
  c.peak_bytes = memory.peak;
  return c;
}

std::vector<double> ema(const std::vector<double>& y, double factor) {
  if (!(factor >= 0 && factor < 1)) throw std::invalid_argument("ema: factor must be in [0, 1)");
  std::vector<double> out;
  out.reserve(y.size());
  double m = 0, weight = 0;  // weight = 1 - factor^(i+1), the sum of the weights so far
  for (double v : y) {
    m = factor * m + (1 - factor) * v;
    weight = factor * weight + (1 - factor);
    out.push_back(m / weight);
  }
  return out;
}

svg::Figure compare_figure(const std::string& title, const std::vector<CompareCurves>& runs) {
  if (runs.empty()) throw std::invalid_argument("compare chart: no runs");
  svg::Figure f;
  f.title = title;
  bool any_eval = false, any_step = false;
  for (const CompareCurves& r : runs) {
    any_eval |= !r.eval_loss.empty();
    any_step |= !r.step_loss.empty();
  }
  if (any_eval) {
    svg::LineChart val = loss_chart("validation loss", "validation loss");
    for (size_t k = 0; k < runs.size(); ++k) {
      svg::Series s{runs[k].strategy, runs[k].eval_tokens, runs[k].eval_loss};
      s.color = int(k);
      s.markers = true;
      val.series.push_back(std::move(s));
    }
    f.panels.push_back(std::move(val));
  }
  if (any_step) {
    svg::LineChart train = loss_chart(
        strprintf("training loss: moving average (factor %.2g per logged step), raw values faint",
                  kLossEmaFactor),
        "training loss");
    for (size_t k = 0; k < runs.size(); ++k) {
      svg::Series raw{runs[k].strategy + " (raw)", runs[k].step_tokens, runs[k].step_loss};
      raw.style = svg::Style::kFaint;
      raw.color = int(k);
      train.series.push_back(std::move(raw));
      svg::Series smooth{runs[k].strategy, runs[k].step_tokens,
                         ema(runs[k].step_loss, kLossEmaFactor)};
      smooth.color = int(k);
      train.series.push_back(std::move(smooth));
    }
    f.panels.push_back(std::move(train));
  }
  f.panels.push_back(memory_chart(runs));
  return f;
}

}  // namespace srkit
