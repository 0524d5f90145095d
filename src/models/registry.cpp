// Building a model from its family: the sample rank it takes, then one sample's forward.
#include "models/registry.h"

#include <algorithm>

#include <fmt/format.h>
#include <torch/nn.h>

#include "config/config.h"
#include "core/error.h"
#include "core/text.h"
#include "data/schema.h"
#include "models/flops.h"

namespace gputrain {
namespace {

bool takes_rank(const Family& e, size_t rank) {
  return e.ranks.empty() || std::find(e.ranks.begin(), e.ranks.end(), rank) != e.ranks.end();
}

// "use --model lstm, gru, transformer or mlp for samples of shape 64x8": the models that take
// this rank, the specialised ones first (mlp takes anything, so it comes last).
std::string rank_hint(const std::vector<int64_t>& shape) {
  // (Not those that read named fields: no x/y sample suits them.)
  auto fits = model_names_where(
      [&](const Family& f) { return !f.ranks.empty() && !f.named_inputs && takes_rank(f, shape.size()); });
  const auto any = model_names_where([](const Family& f) { return f.ranks.empty(); });
  fits.insert(fits.end(), any.begin(), any.end());
  return "use --model " + join_words(fits, " or ") + " for samples of shape " + shape_text(shape) +
         " (gputrain models lists them)";
}

// One sample of zeros, as the data would give it: a varying field at the data's longest size.
Batch probe_batch(const ModelSpec& spec) {
  if (!spec.fields) {
    std::vector<int64_t> dims = {1};
    dims.insert(dims.end(), spec.input_shape.begin(), spec.input_shape.end());
    return Batch{torch::zeros(dims), torch::zeros({1}, torch::kLong)};
  }
  Batch b;
  for (const auto& f : spec.fields->fields) {
    std::vector<int64_t> dims = {1};
    for (int64_t d : f.shape) dims.push_back(d < 0 ? std::max<int64_t>(f.longest, 1) : d);
    b.names.push_back(f.name);
    b.tensors.push_back(torch::zeros(dims, f.dtype == DType::kI64 ? torch::kLong : torch::kFloat));
  }
  return b;
}

}  // namespace

int64_t pick_output(const std::vector<std::string>& names, const std::string& wanted) {
  if (wanted.empty()) return names.empty() ? -1 : 0;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == wanted) return static_cast<int64_t>(i);
  const auto position = parse_integer(wanted);
  return position && *position >= 0 && *position < static_cast<int64_t>(names.size()) ? *position : -1;
}

std::string output_misfit(const std::vector<int64_t>& shape, const ModelSpec& spec) {
  const TensorField* t = spec.fields ? spec.fields->find(spec.fields->target) : nullptr;
  auto dims = [](const std::vector<int64_t>& v) {
    std::vector<std::string> words;
    for (int64_t d : v) words.push_back(d < 0 ? "any" : std::to_string(d));
    return "[" + join(words, ", ") + "]";
  };
  if (t && t->dtype == DType::kI64 && !t->shape.empty()) {
    // A class per position: [B, positions..., V], V at least the classes the labels use.
    bool fits = shape.size() == t->shape.size() + 2;
    for (size_t i = 0; fits && i < t->shape.size(); ++i)
      fits = shape[i + 1] < 0 || t->shape[i] < 0 || shape[i + 1] == t->shape[i];
    if (fits && (shape.back() < 0 || shape.back() >= spec.num_classes)) return "";
    return fmt::format("returns outputs of shape {} per batch; the target '{}' ({}) needs [batch, {}, >= {}]: a score "
                       "for each of its {} classes at every position",
                       dims(shape), t->name, t->text(), t->shape.size() == 1 ? "positions" : dims(t->shape),
                       spec.num_classes, spec.num_classes);
  }
  if (shape.size() == 2 && (shape[1] < 0 || shape[1] == spec.num_classes)) return "";
  return fmt::format("returns outputs of shape {} per batch; the data needs {} per sample", dims(shape), spec.num_classes);
}

NetPtr make_model(const std::string& name, const ModelSpec& spec) {
  const Family* e = &family(name);
  if (spec.fields && !e->named_inputs)
    throw usage_error(fmt::format("model '{}' reads one input, x; the data gives fields {}", name, spec.fields->text()),
                      "train a --model program (.pt2) whose forward takes the data's fields by name");
  if (!spec.fields && !takes_rank(*e, spec.input_shape.size()))
    throw usage_error("model '" + name + "' needs samples of shape " + e->input + ", the data gives samples of shape " +
                          shape_text(spec.input_shape),
                      rank_hint(spec.input_shape));
  // Shapes the rank check cannot see (an input too small for a model's pooling or stride) fail
  // while building or in the first forward: both are tried here, on one sample, so the user gets
  // one line about the sample shape instead of a kernel's message mid-run.
  const std::string problem = "model '" + name + "' cannot take " +
                              (spec.fields ? "the data's fields " + spec.fields->text()
                                           : "samples of shape " + shape_text(spec.input_shape));
  const std::string hint =
      "the sample shape comes from --input_shape (synthetic data) or from the data (--image_size for images, "
      "--window for series); gputrain models lists what each model takes";
  NetPtr net;
  try {
    net = e->make(spec);
    torch::NoGradGuard no_grad;
    net->eval();  // one sample: batch statistics would fail in training mode
    FlopCounter counter;
    auto y = net->forward_batch(probe_batch(spec));
    net->flops_per_sample = counter.flops();
    net->train();
    const std::string misfit = output_misfit(y.sizes().vec(), spec);
    if (!misfit.empty()) throw usage_error("model '" + name + "' " + misfit, "export a model whose outputs fit the data's target");
  } catch (const c10::OutOfMemoryError&) {
    throw;  // not a shape problem
  } catch (const std::invalid_argument& ex) {
    throw usage_error(problem + ": " + ex.what(), hint);
  } catch (const c10::Error& ex) {
    std::string what = ex.what_without_backtrace();
    throw usage_error(problem + ": " + what.substr(0, what.find('\n')), hint);
  }
  return net;
}

void Net::add_piece(std::string name, std::function<torch::Tensor(torch::Tensor)> run,
                    const std::vector<std::shared_ptr<torch::nn::Module>>& modules, std::vector<torch::Tensor> tensors) {
  int64_t parameters = 0;
  for (const auto& t : tensors) parameters += t.numel();  // the loose tensors given are parameters
  for (const auto& m : modules) {
    for (const auto& p : m->parameters()) {
      tensors.push_back(p);
      parameters += p.numel();
    }
    for (const auto& b : m->buffers()) tensors.push_back(b);
  }
  pieces_.push_back({std::move(name), std::move(run), std::move(tensors), parameters});
}

std::pair<torch::Tensor, torch::Tensor> cache_positions(const torch::Tensor& ids, const KvCache& cache) {
  const int64_t B = ids.size(0), t = ids.size(1), length = cache.length;
  const auto slots = torch::arange(length, length + t, ids.options());
  const auto keys = torch::arange(length + t, ids.options()).view({1, 1, -1});
  auto positions = slots.unsqueeze(0).expand({B, t});
  const auto sees = keys <= slots.view({1, -1, 1});
  if (cache.pad.defined()) {
    // A row's positions start at its first real token. A padding slot sees only itself: its
    // output stays finite and no real token ever reads it.
    const auto real = keys >= cache.pad.view({B, 1, 1});
    return {(positions - cache.pad.unsqueeze(1)).clamp_min(0), ((sees & real) | (keys == slots.view({1, -1, 1}))).unsqueeze(1)};
  }
  return {positions, length > 0 && t > 1 ? sees.unsqueeze(1) : torch::Tensor()};
}

torch::Tensor Net::forward_cached(const torch::Tensor&, KvCache&) {
  throw usage_error("this model keeps no key-value cache: it does not generate text",
                    "generate from a language model (--model gpt)");
}

torch::Tensor Net::forward_pieces(const torch::Tensor& x) const {
  auto y = run_pieces(pieces_, x, 0, pieces_.size());
  return y.device() == x.device() ? y : y.to(x.device());
}

std::pair<torch::nn::Module*, std::string> owner_of(torch::nn::Module& root, const std::string& name) {
  torch::nn::Module* m = &root;
  size_t start = 0;
  for (size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1) {
    const std::string part = name.substr(start, dot - start);
    auto children = m->named_children();
    if (auto* child = children.find(part)) m = child->get();
    else m = m->register_module(part, std::make_shared<torch::nn::Module>()).get();
  }
  return {m, name.substr(start)};
}

int64_t parameter_count(const Net& net) {
  int64_t n = 0;
  for (const auto& p : net.parameters()) n += p.numel();
  return n;
}

ModelSpec model_spec(const Config& c, std::vector<int64_t> input_shape, int64_t outputs) {
  ModelSpec s;
  s.input_shape = std::move(input_shape);
  s.num_classes = outputs;
  s.width = c.width;
  s.depth = c.depth;
  s.stem = c.stem;
  s.heads = c.heads;
  s.dropout = c.dropout;
  s.grad_checkpointing = c.grad_checkpointing;
  s.output_name = c.output_name;
  s.positions = c.positions;
  s.kv_heads = c.kv_heads;
  s.mlp_width = c.mlp_width;
  s.rope_theta = c.rope_theta;
  s.norm_eps = c.norm_eps;
  s.tie_embeddings = c.tie_embeddings;
  if (!c.rope_scaling.empty()) {
    s.rope_scaling = parse_numbers(c.rope_scaling);
    if (s.rope_scaling.size() != 4 || s.rope_scaling[0] < 1 || s.rope_scaling[1] <= 0 ||
        s.rope_scaling[2] <= s.rope_scaling[1] || s.rope_scaling[3] < 1)
      throw usage_error("--rope_scaling '" + c.rope_scaling + "' is not Llama 3's scaling",
                        "factor,low_freq_factor,high_freq_factor,original_positions with high above low, e.g. 32,1,4,8192");
  }
  return s;
}

}  // namespace gputrain
