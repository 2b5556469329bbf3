// Helpers for the SVG chart tests: a well-formedness check, the text boxes
// of a document (its geometry as a reader sees it), and the default charts of
// every kind with seven long series names.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lib/charts/compare_chart.h"
#include "lib/charts/train_chart.h"
#include "lib/util/svg.h"

namespace srkit::svg_testing {

// Returns "" when `xml` is well-formed (one root element, every tag closed in
// order, attribute values quoted, no raw '<' or stray '&' in text), else why not.
inline std::string xml_problem(const std::string& xml) {
  std::vector<std::string> stack;
  size_t i = 0, roots = 0;
  while (i < xml.size()) {
    if (xml[i] != '<') {
      if (xml[i] == '&') {
        const size_t semi = xml.find(';', i);
        const std::string ent = xml.substr(i, semi == std::string::npos ? 0 : semi - i + 1);
        if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
          return "bad entity at " + std::to_string(i);
      }
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(xml[i])))
        return "text outside the root at " + std::to_string(i);
      ++i;
      continue;
    }
    // Find the end of the tag, skipping quoted attribute values.
    size_t j = i + 1;
    char quote = 0;
    for (; j < xml.size(); ++j) {
      if (quote) {
        if (xml[j] == quote)
          quote = 0;
        else if (xml[j] == '<')
          return "'<' inside an attribute at " + std::to_string(j);
      } else if (xml[j] == '"' || xml[j] == '\'') {
        quote = xml[j];
      } else if (xml[j] == '>') {
        break;
      }
    }
    if (j >= xml.size()) return "unterminated tag at " + std::to_string(i);
    const std::string tag = xml.substr(i + 1, j - i - 1);
    i = j + 1;
    if (tag.empty()) return "empty tag";
    if (tag.front() == '?') {
      if (tag.back() != '?') return "bad declaration";
      continue;
    }
    if (tag.front() == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) return "mismatched </" + name + ">";
      stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
    if (name.empty()) return "empty tag name";
    if (stack.empty()) ++roots;
    if (tag.back() != '/') stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "expected one root element, got " + std::to_string(roots);
  return "";
}

inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// The value of attribute `name` in a tag's text ("" when absent).
inline std::string attribute(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t p = tag.find(key);
  if (p == std::string::npos) return "";
  const size_t start = p + key.size();
  return tag.substr(start, tag.find('"', start) - start);
}

inline double number_attribute(const std::string& tag, const std::string& name, double fallback) {
  const std::string v = attribute(tag, name);
  return v.empty() ? fallback : std::strtod(v.c_str(), nullptr);
}

struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  bool inside(const Box& o) const { return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1; }
};

struct TextBox {
  std::string text;   // as drawn (entities decoded)
  std::string group;  // class of the nearest enclosing <g> that has one ("" if none)
  Box box;
};

// The estimate the tests hold the layout to: a character is 0.6 x the font
// size wide (sans-serif digits and lower case average 0.5-0.55 em); a line
// reaches 0.8 x the size above its baseline and 0.25 x below.
inline Box estimated_box(double x, double y, const std::string& anchor, double size, size_t chars) {
  const double w = 0.6 * size * double(chars);
  const double left = anchor == "middle" ? x - w / 2 : anchor == "end" ? x - w : x;
  return {left, y - 0.8 * size, left + w, y + 0.25 * size};
}

// The box after rotate(angle cx cy): the bounding box of its turned corners.
inline Box rotated(const Box& b, double degrees, double cx, double cy) {
  const double a = degrees * M_PI / 180, c = std::cos(a), s = std::sin(a);
  Box out{1e300, 1e300, -1e300, -1e300};
  for (double x : {b.x0, b.x1}) {
    for (double y : {b.y0, b.y1}) {
      const double rx = cx + (x - cx) * c - (y - cy) * s, ry = cy + (x - cx) * s + (y - cy) * c;
      out = {std::min(out.x0, rx), std::min(out.y0, ry), std::max(out.x1, rx),
             std::max(out.y1, ry)};
    }
  }
  return out;
}

inline std::string decode_entities(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    const std::string e = s.substr(i, semi - i + 1);
    out += e == "&lt;" ? '<' : e == "&gt;" ? '>' : e == "&quot;" ? '"' : e == "&apos;" ? '\'' : '&';
    i = semi;
  }
  return out;
}

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Every <text> of the document with its estimated box in document
// coordinates, and the plot frames (<rect class="frame">).
struct Geometry {
  double width = 0, height = 0;
  std::vector<TextBox> texts;
  std::vector<Box> frames;
};

inline Geometry geometry(const std::string& svg) {
  Geometry g;
  double root_font = 12;
  std::vector<std::string> groups;  // class of each open <g>
  for (size_t i = svg.find('<'); i != std::string::npos; i = svg.find('<', i + 1)) {
    const size_t end = svg.find('>', i);
    const std::string tag = svg.substr(i, end - i + 1);
    if (tag.rfind("<svg ", 0) == 0) {
      g.width = number_attribute(tag, "width", 0);
      g.height = number_attribute(tag, "height", 0);
      root_font = number_attribute(tag, "font-size", 12);
    } else if (tag.rfind("<g", 0) == 0 && (tag[2] == ' ' || tag[2] == '>')) {
      groups.push_back(attribute(tag, "class"));
    } else if (tag == "</g>") {
      groups.pop_back();
    } else if (tag.rfind("<rect ", 0) == 0 && attribute(tag, "class") == "frame") {
      const double x = number_attribute(tag, "x", 0), y = number_attribute(tag, "y", 0);
      g.frames.push_back(
          {x, y, x + number_attribute(tag, "width", 0), y + number_attribute(tag, "height", 0)});
    } else if (tag.rfind("<text ", 0) == 0) {
      const size_t close = svg.find("</text>", end);
      TextBox t;
      t.text = decode_entities(svg.substr(end + 1, close - end - 1));
      for (auto it = groups.rbegin(); it != groups.rend() && t.group.empty(); ++it) t.group = *it;
      t.box = estimated_box(number_attribute(tag, "x", 0), number_attribute(tag, "y", 0),
                            attribute(tag, "text-anchor"),
                            number_attribute(tag, "font-size", root_font), code_points(t.text));
      const std::string transform = attribute(tag, "transform");
      if (!transform.empty()) {
        double angle = 0, cx = 0, cy = 0;
        if (std::sscanf(transform.c_str(), "rotate(%lf %lf %lf)", &angle, &cx, &cy) == 3)
          t.box = rotated(t.box, angle, cx, cy);
      }
      g.texts.push_back(t);
    }
  }
  return g;
}

// Every layout fault of a document: overlapping text boxes, text leaving the
// document, text (other than bar notes) over a plot area, notes outside one.
inline std::vector<std::string> layout_problems(const std::string& svg) {
  const Geometry g = geometry(svg);
  std::vector<std::string> out;
  const Box page{0, 0, g.width, g.height};
  for (size_t a = 0; a < g.texts.size(); ++a) {
    const TextBox& t = g.texts[a];
    if (!t.box.inside(page)) out.push_back("'" + t.text + "' leaves the document");
    for (size_t b = a + 1; b < g.texts.size(); ++b) {
      if (t.box.overlaps(g.texts[b].box))
        out.push_back("'" + t.text + "' overlaps '" + g.texts[b].text + "'");
    }
    bool in_a_frame = false;
    for (const Box& f : g.frames) {
      in_a_frame |= t.box.inside(f);
      if (t.group != "notes" && t.box.overlaps(f))
        out.push_back("'" + t.text + "' (" + t.group + ") is over a plot area");
    }
    if (t.group == "notes" && !in_a_frame) out.push_back("note '" + t.text + "' leaves its plot");
  }
  return out;
}

// ---- the default charts, seven long names --------------------------------------

inline std::vector<std::string> seven_long_names() {
  return {"bf16-sr:mround=sr,v=f32",   "bf16-sr:mround=sr,vround=sr", "bf16-kahan:m=f32,v=f32",
          "mixed:update=sr,mround=sr", "bf16-rem16:m=bf16,v=bf16",    "fp32:compute=bf16,m=bf16",
          "bf16:w=bf16,m=f32,v=f32"};
}

// A deterministic noisy loss curve: exponential decay plus a fixed ripple.
inline double sample_loss(int strategy, int step) {
  return 2.2 + 0.05 * strategy + 3.3 * std::exp(-step / 120.0) +
         0.15 * std::sin(step * 1.7 + strategy) * std::cos(step * 0.37);
}

inline std::vector<CompareCurves> sample_compare_runs(const std::vector<std::string>& names) {
  std::vector<CompareCurves> runs;
  for (size_t k = 0; k < names.size(); ++k) {
    CompareCurves c;
    c.strategy = names[k];
    for (int step = 1; step <= 500; ++step) {
      c.step_tokens.push_back(step * 512.0);
      c.step_loss.push_back(sample_loss(int(k), step));
    }
    for (int step : {0, 100, 200, 300, 400, 500}) {
      c.eval_tokens.push_back(step * 512.0);
      c.eval_loss.push_back(sample_loss(int(k), step) + 0.1);
    }
    const size_t mib = 1 << 20;
    c.peak_bytes = {size_t(0.4 * mib), k % 2 ? size_t(0.8 * mib) : 0,
                    size_t(0.4 * mib), size_t((1 + k % 3) * 0.4 * mib),
                    size_t(3.1 * mib), size_t(0.2 * mib)};
    runs.push_back(c);
  }
  return runs;
}

inline TrainMatrixResult sample_bench_result(const std::vector<std::string>& names) {
  TrainMatrixResult r;
  r.backend = "cpu (2 threads)";
  int n = 0;
  for (const char* model : {"tiny", "d4"}) {
    for (int batch : {2, 8}) {
      for (const std::string& s : names) {
        CellResult c;
        c.model = model;
        c.strategy = s;
        c.batch = batch;
        c.seq_len = 256;
        c.tokens_per_s = 900.0 + 137.0 * (n % 11) * batch;
        c.memory.total_peak = size_t(1 << 20) * size_t(20 + 7 * (n % 5) * batch);
        if (n == 3) c.status = "OOM";
        r.cells.push_back(c);
        ++n;
      }
    }
  }
  return r;
}

// One chart of every kind, default sizes, series named by `names`.
struct NamedChart {
  std::string kind;
  std::string svg;
};

inline std::vector<NamedChart> default_charts(const std::vector<std::string>& names) {
  std::vector<NamedChart> out;
  svg::LineChart line;
  line.title = "training loss";
  line.x_label = "tokens";
  line.y_label = "loss";
  for (size_t k = 0; k < names.size(); ++k) {
    svg::Series s{names[k], {}, {}};
    for (int step = 1; step <= 500; ++step) {
      s.x.push_back(step * 512.0);
      s.y.push_back(sample_loss(int(k), step));
    }
    line.series.push_back(s);
  }
  out.push_back({"line", svg::render(line)});

  svg::LineChart log = line;
  log.title = "final |relative error|";
  log.log_x = log.log_y = true;
  for (svg::Series& s : log.series) {
    for (double& y : s.y) y = std::pow(10.0, -y);
  }
  out.push_back({"log-log line", svg::render(log)});

  svg::Histogram hist;
  hist.title = "rounding error";
  hist.x_label = "error / ulp";
  hist.y_label = "count";
  for (int b = 0; b <= 20; ++b) hist.edges.push_back(-1 + 0.1 * b);
  for (size_t k = 0; k < names.size(); ++k) {
    svg::HistogramSeries s{names[k], {}};
    for (int b = 0; b < 20; ++b)
      s.values.push_back(100.0 * std::exp(-0.05 * (b - 10) * (b - 10)) + double(k));
    hist.series.push_back(s);
  }
  out.push_back({"histogram", svg::render(hist)});

  const svg::Figure bench = train_figure(sample_bench_result(names));
  out.push_back({"grouped bars", svg::render(std::get<svg::BarChart>(bench.panels[0]))});
  const svg::Figure compare = compare_figure("sr-train --compare", sample_compare_runs(names));
  out.push_back({"stacked bars", svg::render(std::get<svg::BarChart>(compare.panels.back()))});
  out.push_back({"compare figure", svg::render(compare)});
  out.push_back({"bench figure", svg::render(bench)});
  return out;
}

}  // namespace srkit::svg_testing
