// lstm and gru: sequence (T x F, batch first) -> the last time step's hidden state -> Linear.
// A flat sample (F) reads as a sequence of one step.
#include <torch/nn.h>

#include "models/family.h"
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

// LSTM and GRU differ only in their recurrent layer.
Family recurrent(std::string name, NetPtr (*make)(const ModelSpec&), const std::string& torch_layer) {
  return {.name = std::move(name),
          .make = make,
          .ranks = {2, 1},
          .input = "T x F or F",
          .options = {"depth", "dropout"},
          .layers = {"rnn", "fc"},
          .head = {"fc"},
          .twin = torch_layer + " rnn (batch_first) and nn.Linear fc on the last step's output"};
}

}  // namespace

const Family& lstm_family() {
  static const Family f = recurrent("lstm", [](const ModelSpec& s) -> NetPtr {
    return std::make_shared<RecurrentNet<nn::LSTM, nn::LSTMOptions>>(s);
  }, "nn.LSTM");
  return f;
}

const Family& gru_family() {
  static const Family f = recurrent("gru", [](const ModelSpec& s) -> NetPtr {
    return std::make_shared<RecurrentNet<nn::GRU, nn::GRUOptions>>(s);
  }, "nn.GRU");
  return f;
}

}  // namespace gputrain
