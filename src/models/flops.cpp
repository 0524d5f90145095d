// FlopCounter: shapes from the operators' inputs and outputs, read by RecordFunction callbacks.
#include "models/flops.h"

#include <cstring>
#include <vector>
#include <stdexcept>

#include <ATen/record_function.h>

namespace gputrain {
namespace {

thread_local double t_flops = 0;
thread_local int t_inside = 0;  // depth inside an operator counted whole (its inner calls are not)

double numel(c10::IntArrayRef s, size_t from = 0) {
  double n = 1;
  for (size_t i = from; i < s.size(); ++i) n *= static_cast<double>(s[i]);
  return n;
}

c10::IntArrayRef shape(const at::RecordFunction& fn, size_t i) {
  auto in = fn.inputs();
  if (i >= in.size() || !in[i].isTensor()) return {};
  return in[i].toTensor().sizes();
}

bool is(const at::RecordFunction& fn, const char* name) { return std::strcmp(fn.name(), name) == 0; }

// A convolution's operand shapes, kept from its start: the inputs are not readable at its end.
struct ConvShapes : at::ObserverContext {
  std::vector<int64_t> x, w;
  bool transposed = false;
};

bool counted_whole(const at::RecordFunction& fn) {
  return is(fn, "aten::convolution") || is(fn, "aten::scaled_dot_product_attention");
}

// 2 x (multiply-adds) of a product of [.., n, k] by [.., k, m].
double product(c10::IntArrayRef a, c10::IntArrayRef b) {
  if (a.size() < 2 || b.size() < 2) return 0;
  return 2.0 * numel(a) * static_cast<double>(b[b.size() - 1]);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (counted_whole(fn)) {
    if (t_inside++ == 0 && is(fn, "aten::convolution")) {
      auto c = std::make_unique<ConvShapes>();
      c->x = shape(fn, 0).vec();
      c->w = shape(fn, 1).vec();
      const auto in = fn.inputs();
      c->transposed = in.size() > 6 && in[6].isBool() && in[6].toBool();
      return c;
    }
    if (t_inside == 1 && is(fn, "aten::scaled_dot_product_attention")) {
      // q [.., L, E] x k^T [.., E, S], then the weights [.., L, S] x v [.., S, Ev].
      auto q = shape(fn, 0), k = shape(fn, 1), v = shape(fn, 2);
      if (q.size() >= 2 && k.size() >= 2 && v.size() >= 2)
        t_flops += 2.0 * numel(q) * static_cast<double>(k[k.size() - 2]) +
                   2.0 * numel(q, 0) / static_cast<double>(q[q.size() - 1]) * numel(v, v.size() - 2);
    }
    return nullptr;
  }
  if (t_inside > 0) return nullptr;
  if (is(fn, "aten::mm") || is(fn, "aten::bmm"))
    t_flops += product(shape(fn, 0), shape(fn, 1));
  else if (is(fn, "aten::addmm") || is(fn, "aten::baddbmm"))
    t_flops += product(shape(fn, 1), shape(fn, 2));
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (!counted_whole(fn)) return;
  --t_inside;
  auto* c = dynamic_cast<ConvShapes*>(ctx);
  if (!c || c->w.size() < 3 || c->x.size() < 3) return;
  // Each output value is a dot product over (input channels / groups) x kernel positions; a
  // transposed convolution runs the same products from the input side.
  if (c->transposed) {
    t_flops += 2.0 * numel(c->x) * numel(c->w, 1);
  } else if (!fn.outputs().empty() && fn.outputs()[0].isTensor()) {
    t_flops += 2.0 * numel(fn.outputs()[0].toTensor().sizes()) * numel(c->w, 1);
  }
}

}  // namespace

FlopCounter::FlopCounter() {
  t_flops = 0;
  t_inside = 0;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_start, on_end).needsInputs(true).needsOutputs(true).scopes(
          {at::RecordScope::FUNCTION}));
}

FlopCounter::~FlopCounter() { at::removeCallback(handle_); }

double FlopCounter::flops() const { return t_flops; }

}  // namespace gputrain
