// lstm and gru: sequence (T x F, batch first) -> the last time step's hidden state -> Linear.
// A flat sample (F) reads as a sequence of one step.
#include <torch/nn.h>

#include "models/registry.h"

namespace gputrain {
namespace {

namespace nn = torch::nn;

template <typename Rnn, typename Options>
class RecurrentNet : public Net {
 public:
  explicit RecurrentNet(const ModelSpec& s) {
    const int64_t features = s.input_shape.back();
    const int64_t hidden = s.width > 0 ? s.width : 128;
    const int64_t layers = s.depth > 0 ? s.depth : 2;
    // Dropout applies between layers only; torch warns when it is set on a single layer.
    rnn_ = register_module(
        "rnn",
        Rnn(Options(features, hidden).num_layers(layers).batch_first(true).dropout(layers > 1 ? s.dropout : 0.0)));
    fc_ = register_module("fc", nn::Linear(hidden, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    if (x.dim() == 2) x = x.unsqueeze(1);      // (N, F) -> (N, 1, F)
    auto out = std::get<0>(rnn_->forward(x));  // (N, T, hidden): the top layer at every step
    return fc_(out.select(1, -1));
  }

 private:
  Rnn rnn_{nullptr};
  nn::Linear fc_{nullptr};
};

}  // namespace

NetPtr make_lstm(const ModelSpec& spec) { return std::make_shared<RecurrentNet<nn::LSTM, nn::LSTMOptions>>(spec); }
NetPtr make_gru(const ModelSpec& spec) { return std::make_shared<RecurrentNet<nn::GRU, nn::GRUOptions>>(spec); }

}  // namespace gputrain
