// Independent host references of the model ops in fp64 (the textbook formulas,
// written without the kernels' code), and central finite differences that
// perturb many independent elements in one evaluation, so a gradient check
// costs a few calls of the backend's forward instead of two per element.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace srkit::conformance::ref {

using Vec = std::vector<double>;

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
inline Vec encoder_forward(const std::vector<float>& wte, const std::vector<float>& wpe,
                           const std::vector<int32_t>& tokens, int B, int T, int C) {
  Vec out(size_t(B) * T * C);
  for (int p = 0; p < B * T; ++p) {
    for (int i = 0; i < C; ++i) {
      out[size_t(p) * C + i] = double(wte[size_t(tokens[p]) * C + i]) + wpe[size_t(p % T) * C + i];
    }
  }
  return out;
}

// The contributions dwte (rows of the vocabulary) and dwpe (rows 0..T-1) of dout.
struct EncoderGrads {
  Vec dwte, dwpe;
};
inline EncoderGrads encoder_backward(const std::vector<float>& dout,
                                     const std::vector<int32_t>& tokens, int B, int T, int C,
                                     size_t wte_rows, size_t wpe_rows) {
  EncoderGrads g{Vec(wte_rows * C, 0.0), Vec(wpe_rows * C, 0.0)};
  for (int p = 0; p < B * T; ++p) {
    for (int i = 0; i < C; ++i) {
      g.dwte[size_t(tokens[p]) * C + i] += dout[size_t(p) * C + i];
      g.dwpe[size_t(p % T) * C + i] += dout[size_t(p) * C + i];
    }
  }
  return g;
}

constexpr double kLayernormEps = 1e-5;

struct LayernormOut {
  Vec out, mean, rstd;
};
inline LayernormOut layernorm_forward(const std::vector<float>& inp, const std::vector<float>& w,
                                      const std::vector<float>& b, int N, int C) {
  LayernormOut r{Vec(size_t(N) * C), Vec(N), Vec(N)};
  for (int n = 0; n < N; ++n) {
    const float* x = &inp[size_t(n) * C];
    double m = 0.0, v = 0.0;
    for (int i = 0; i < C; ++i) m += x[i];
    m /= C;
    for (int i = 0; i < C; ++i) v += (x[i] - m) * (x[i] - m);
    const double s = 1.0 / std::sqrt(v / C + kLayernormEps);
    r.mean[n] = m;
    r.rstd[n] = s;
    for (int i = 0; i < C; ++i) r.out[size_t(n) * C + i] = (x[i] - m) * s * w[i] + b[i];
  }
  return r;
}

struct LayernormGrads {
  Vec dinp, dweight, dbias;
};
// Gradients of sum(out * dout): dx = rstd (dnorm - mean(dnorm) - norm mean(dnorm norm)).
inline LayernormGrads layernorm_backward(const std::vector<float>& dout,
                                         const std::vector<float>& inp, const std::vector<float>& w,
                                         int N, int C) {
  const std::vector<float> zeros(C, 0.0f);
  const LayernormOut f = layernorm_forward(inp, w, zeros, N, C);
  LayernormGrads g{Vec(size_t(N) * C), Vec(C, 0.0), Vec(C, 0.0)};
  for (int n = 0; n < N; ++n) {
    const size_t row = size_t(n) * C;
    double dm = 0.0, dnm = 0.0;
    for (int i = 0; i < C; ++i) {
      const double norm = (inp[row + i] - f.mean[n]) * f.rstd[n];
      const double dnorm = double(w[i]) * dout[row + i];
      dm += dnorm;
      dnm += dnorm * norm;
      g.dweight[i] += norm * dout[row + i];
      g.dbias[i] += dout[row + i];
    }
    dm /= C;
    dnm /= C;
    for (int i = 0; i < C; ++i) {
      const double norm = (inp[row + i] - f.mean[n]) * f.rstd[n];
      const double dnorm = double(w[i]) * dout[row + i];
      g.dinp[row + i] = (dnorm - dm - norm * dnm) * f.rstd[n];
    }
  }
  return g;
}

// out[N,OC] = inp[N,C] @ weight[OC,C]^T (+ bias); mag = the sum of the
// magnitudes of the terms (|bias| + sum |inp * weight|), the scale of an fp32
// accumulation's rounding error.
struct MatmulOut {
  Vec out, mag;
};
inline MatmulOut matmul_forward(const std::vector<float>& inp, const std::vector<float>& weight,
                                const float* bias, int N, int C, int OC) {
  MatmulOut r{Vec(size_t(N) * OC), Vec(size_t(N) * OC)};
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double s = bias ? bias[o] : 0.0, m = std::fabs(s);
      for (int c = 0; c < C; ++c) {
        const double t = double(inp[size_t(n) * C + c]) * weight[size_t(o) * C + c];
        s += t;
        m += std::fabs(t);
      }
      r.out[size_t(n) * OC + o] = s;
      r.mag[size_t(n) * OC + o] = m;
    }
  }
  return r;
}

struct MatmulGrads {
  Vec dinp, dweight, dbias;
  Vec dinp_mag, dweight_mag, dbias_mag;  // magnitude sums, as MatmulOut::mag
};
inline MatmulGrads matmul_backward(const std::vector<float>& dout, const std::vector<float>& inp,
                                   const std::vector<float>& weight, int N, int C, int OC) {
  MatmulGrads g{Vec(size_t(N) * C, 0.0), Vec(size_t(OC) * C, 0.0), Vec(OC, 0.0),
                Vec(size_t(N) * C, 0.0), Vec(size_t(OC) * C, 0.0), Vec(OC, 0.0)};
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      const double d = dout[size_t(n) * OC + o];
      g.dbias[o] += d;
      g.dbias_mag[o] += std::fabs(d);
      for (int c = 0; c < C; ++c) {
        const double a = d * weight[size_t(o) * C + c], b = d * inp[size_t(n) * C + c];
        g.dinp[size_t(n) * C + c] += a;
        g.dinp_mag[size_t(n) * C + c] += std::fabs(a);
        g.dweight[size_t(o) * C + c] += b;
        g.dweight_mag[size_t(o) * C + c] += std::fabs(b);
      }
    }
  }
  return g;
}

// Causal self-attention per head: softmax(q k^T / sqrt(hs)) v over t2 <= t.
// inp [B,T,3C] (q, k, v), out [B,T,C]; att [B,NH,T,T] (0 above the diagonal).
struct AttentionOut {
  Vec out, att;
};
inline AttentionOut attention_forward(const std::vector<float>& inp, int B, int T, int C, int NH) {
  const int hs = C / NH;
  AttentionOut r{Vec(size_t(B) * T * C, 0.0), Vec(size_t(B) * NH * T * T, 0.0)};
  const double scale = 1.0 / std::sqrt(double(hs));
  auto x = [&](int b, int t, int part, int h, int i) {
    return double(inp[(size_t(b) * T + t) * 3 * C + size_t(part) * C + size_t(h) * hs + i]);
  };
  std::vector<double> s(T);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        double mx = -1e300, sum = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) {
          double dot = 0.0;
          for (int i = 0; i < hs; ++i) dot += x(b, t, 0, h, i) * x(b, t2, 1, h, i);
          s[t2] = dot * scale;
          mx = std::max(mx, s[t2]);
        }
        for (int t2 = 0; t2 <= t; ++t2) sum += std::exp(s[t2] - mx);
        const size_t row = ((size_t(b) * NH + h) * T + t) * T;
        for (int t2 = 0; t2 <= t; ++t2) {
          const double a = std::exp(s[t2] - mx) / sum;
          r.att[row + t2] = a;
          for (int i = 0; i < hs; ++i) {
            r.out[(size_t(b) * T + t) * C + size_t(h) * hs + i] += a * x(b, t2, 2, h, i);
          }
        }
      }
    }
  }
  return r;
}

// d(sum(out * dout)) / d(inp), [B,T,3C].
inline Vec attention_backward(const std::vector<float>& dout, const std::vector<float>& inp, int B,
                              int T, int C, int NH) {
  const int hs = C / NH;
  const AttentionOut f = attention_forward(inp, B, T, C, NH);
  const double scale = 1.0 / std::sqrt(double(hs));
  Vec dinp(inp.size(), 0.0);
  auto idx = [&](int b, int t, int part, int h, int i) {
    return (size_t(b) * T + t) * 3 * C + size_t(part) * C + size_t(h) * hs + i;
  };
  std::vector<double> da(T), dp(T);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        const size_t row = ((size_t(b) * NH + h) * T + t) * T;
        const float* g = &dout[(size_t(b) * T + t) * C + size_t(h) * hs];
        double dot = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) {
          da[t2] = 0.0;
          for (int i = 0; i < hs; ++i) da[t2] += double(g[i]) * inp[idx(b, t2, 2, h, i)];
          dot += f.att[row + t2] * da[t2];
          for (int i = 0; i < hs; ++i) dinp[idx(b, t2, 2, h, i)] += f.att[row + t2] * g[i];
        }
        for (int t2 = 0; t2 <= t; ++t2) {
          dp[t2] = f.att[row + t2] * (da[t2] - dot) * scale;
          for (int i = 0; i < hs; ++i) {
            dinp[idx(b, t, 0, h, i)] += dp[t2] * inp[idx(b, t2, 1, h, i)];
            dinp[idx(b, t2, 1, h, i)] += dp[t2] * inp[idx(b, t, 0, h, i)];
          }
        }
      }
    }
  }
  return dinp;
}

// GPT-2's GELU (tanh approximation) and its derivative.
inline double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
inline double gelu_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double u = k * (x + 0.044715 * x * x * x);
  const double th = std::tanh(u);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// Softmax over the first V of row l.
inline Vec softmax(const float* l, int V) {
  double mx = l[0], sum = 0.0;
  for (int v = 1; v < V; ++v) mx = std::max(mx, double(l[v]));
  Vec p(V);
  for (int v = 0; v < V; ++v) sum += p[v] = std::exp(l[v] - mx);
  for (double& x : p) x /= sum;
  return p;
}

// losses[N] and dlogits [N,Vp] = (softmax - onehot) * dloss (0 in padding
// columns and ignored rows).
struct CrossEntropyOut {
  Vec losses, dlogits;
};
inline CrossEntropyOut crossentropy(const std::vector<float>& logits,
                                    const std::vector<int32_t>& targets, float dloss, int N, int V,
                                    int Vp) {
  CrossEntropyOut r{Vec(N, 0.0), Vec(size_t(N) * Vp, 0.0)};
  for (int n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    const Vec p = softmax(&logits[size_t(n) * Vp], V);
    r.losses[n] = -std::log(p[targets[n]]);
    for (int v = 0; v < V; ++v) {
      r.dlogits[size_t(n) * Vp + v] = (p[v] - (v == targets[n] ? 1.0 : 0.0)) * dloss;
    }
  }
  return r;
}

}  // namespace srkit::conformance::ref

namespace srkit::conformance {

// Central differences of many elements at once. Each perturbed element x[idx[k]]
// must affect only the partial loss parts[part[k]] (e.g. one row of a row-wise
// op), so all of them can move together: x[idx] += h, evaluate the parts, x[idx]
// -= h, evaluate again. Returns d part[k] / d x[idx[k]] for every k, with the
// denominator taken from the perturbed values as stored in fp32.
inline std::vector<double> finite_diff_parts(std::vector<float>& x, const std::vector<size_t>& idx,
                                             const std::vector<size_t>& part,
                                             const std::function<std::vector<double>()>& parts,
                                             float h) {
  std::vector<float> orig(idx.size()), xp(idx.size()), xm(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) orig[k] = x[idx[k]];
  for (size_t k = 0; k < idx.size(); ++k) xp[k] = x[idx[k]] = orig[k] + h;
  const std::vector<double> lp = parts();
  for (size_t k = 0; k < idx.size(); ++k) xm[k] = x[idx[k]] = orig[k] - h;
  const std::vector<double> lm = parts();
  for (size_t k = 0; k < idx.size(); ++k) x[idx[k]] = orig[k];
  std::vector<double> g(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    g[k] = (lp[part[k]] - lm[part[k]]) / (double(xp[k]) - double(xm[k]));
  }
  return g;
}

// Partial losses sum_j out[j] * w[j] over consecutive groups of `group` elements
// (rows of a row-major tensor), in fp64.
inline std::vector<double> group_sums(const std::vector<float>& out, const std::vector<float>& w,
                                      size_t group) {
  std::vector<double> s(out.size() / group, 0.0);
  for (size_t j = 0; j < out.size(); ++j) s[j / group] += double(out[j]) * double(w[j]);
  return s;
}

}  // namespace srkit::conformance

namespace srkit::conformance {

// finite_diff_parts over a row-major [rows, cols] x one column at a time: the
// column's elements move together, row r feeding part part_of_row(r).
inline std::vector<double> finite_diff_columns(std::vector<float>& x, size_t rows, size_t cols,
                                               const std::function<size_t(size_t)>& part_of_row,
                                               const std::function<std::vector<double>()>& parts,
                                               float h) {
  std::vector<double> g(x.size(), 0.0);
  std::vector<size_t> idx(rows), part(rows);
  for (size_t i = 0; i < cols; ++i) {
    for (size_t r = 0; r < rows; ++r) {
      idx[r] = r * cols + i;
      part[r] = part_of_row(r);
    }
    const std::vector<double> gi = finite_diff_parts(x, idx, part, parts, h);
    for (size_t r = 0; r < rows; ++r) g[idx[r]] = gi[r];
  }
  return g;
}

}  // namespace srkit::conformance
