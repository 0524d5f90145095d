// The Net interface every model implements, and building one from its family (models/family.h).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "core/pieces.h"
#include "data/batch.h"
#include "models/family.h"

namespace gputrain {

// The last hidden states [..., d] and the weight [classes, d] of a model whose output is
// linear(hidden, weight), with no bias; empty for any other model.
struct HeadInput {
  torch::Tensor hidden, weight;
  bool defined() const { return hidden.defined(); }
};

// A language model's keys and values so far, for decoding a token at a time (text/generate.h).
// Row b's first pad[b] slots are left padding (a batch of prompts of different lengths): no query
// attends to them, and the row's positions count from its first real token.
struct KvCache {
  int64_t capacity = 0;                     // slots held: at most the model's positions
  int64_t length = 0;                       // slots filled so far
  torch::Tensor pad;                        // [B] int64 on the model's device; undefined = no padding
  std::vector<torch::Tensor> keys, values;  // per layer [B, heads, capacity, head dim]: the model's first call makes them
};

// The positions [B, t] of the t new slots of `ids` [B, t] after the cache's, and the mask [B or 1,
// 1, t, length + t] of the slots each new one sees; undefined when that is the earlier ones and
// itself onwards in order (a first pass from slot 0, whose is_causal aligns queries with the
// first keys, or a lone query, which sees them all).
std::pair<torch::Tensor, torch::Tensor> cache_positions(const torch::Tensor& ids, const KvCache& cache);

class Net : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // The step, evaluation and inference call this: a model of one input reads x; one taking named
  // inputs (Family::named_inputs) binds each to the batch's field of its name.
  virtual torch::Tensor forward_batch(const Batch& b) { return forward(b.x()); }
  // The forward up to the head, and the head's weight: a per-token cross-entropy then computes
  // the head chunk by chunk and never holds the whole [tokens, vocabulary] logits
  // (step/head_loss.h). Empty when the model has no such head.
  virtual HeadInput forward_head(const Batch&) { return {}; }
  // A language model's logits [B, t, vocabulary] for ids [B, t] that continue the sequence in
  // `cache`, whose keys and values it extends by t slots. Only models that generate text
  // (Family::generates) implement it.
  virtual torch::Tensor forward_cached(const torch::Tensor& ids, KvCache& cache);
  // FLOPs of one sample's forward pass (models/flops.h), counted in make_model's probe; for MFU.
  double flops_per_sample = 0;

  // The forward as consecutive pieces; empty when the model cannot be split into stages.
  // Pipeline stages are cut between pieces (--pipeline_stages).
  const Pieces& pieces() const { return pieces_; }

  // --freeze_bn: modules that stay in eval mode whatever train() asks, so their running
  // statistics stay as the pretrained weights had them.
  void keep_in_eval(std::vector<std::shared_ptr<torch::nn::Module>> modules) { kept_in_eval_ = std::move(modules); }
  void train(bool on = true) override {
    torch::nn::Module::train(on);
    for (auto& m : kept_in_eval_) m->eval();
  }

 protected:
  // A model that declares pieces makes its forward forward_pieces(x): one source of truth.
  void add_piece(std::string name, std::function<torch::Tensor(torch::Tensor)> run,
                 const std::vector<std::shared_ptr<torch::nn::Module>>& modules, std::vector<torch::Tensor> tensors = {});
  // Every piece in order; the result on x's device (evaluation of a model spread over devices).
  torch::Tensor forward_pieces(const torch::Tensor& x) const;

 private:
  Pieces pieces_;
  std::vector<std::shared_ptr<torch::nn::Module>> kept_in_eval_;
};

// Throws a usage error for an unknown name, or for samples of a rank the model does not take.
NetPtr make_model(const std::string& name, const ModelSpec& spec);
int64_t parameter_count(const Net& net);

// The module under `root` that holds the tensor named "a.b.c" (a.b, made on the way as empty
// modules) and the tensor's own name "c": how a model read from a file keeps PyTorch's names.
std::pair<torch::nn::Module*, std::string> owner_of(torch::nn::Module& root, const std::string& name);

// The spec a Config asks for, for samples of `input_shape` and `outputs` outputs.
ModelSpec model_spec(const Config& c, std::vector<int64_t> input_shape, int64_t outputs);

// --output_name `wanted` among a program's outputs `names` (dict keys, or positions "0", "1"):
// its index by name, else by position; the first when `wanted` is empty; -1 when none matches.
int64_t pick_output(const std::vector<std::string>& names, const std::string& wanted);

// What is wrong with a model output of `shape` for the spec's target ("" when it fits): [B,
// classes] for a class, [B, targets] for regression values, [B, T, V] with V >= classes for a
// class per token (a language model's vocabulary may hold more than the labels use).
std::string output_misfit(const std::vector<int64_t>& shape, const ModelSpec& spec);

}  // namespace gputrain
