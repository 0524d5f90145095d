// One spec per model family: everything the rest of gputrain asks of a family, in one place.
// A new family is its own file (the factory and its Family), one line in the table of
// models/families.cpp, and its test (tests/test_models.cpp checks every field of every family
// against the model it builds).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gputrain {

class Net;
using NetPtr = std::shared_ptr<Net>;
struct Config;
struct SampleSchema;

// What the factory builds: the data's sample shape and outputs, and the model flags.
struct ModelSpec {
  std::vector<int64_t> input_shape;  // one sample, without the batch: C,H,W / T,F / F / C,D,H,W
  int64_t num_classes = 10;          // outputs: classes, or target values for regression
  int64_t width = 0;                 // base width; 0 = the model's default
  int64_t depth = 0;                 // layers (lstm, gru, transformer) or blocks (cnn3d); 0 = the model's default
  std::string stem = "auto";         // resnets: auto | small | imagenet
  int64_t heads = 0;                 // transformer attention heads; 0 = the default
  double dropout = 0.0;              // transformer layers, between lstm/gru layers
  bool grad_checkpointing = false;   // recompute residual blocks / encoder layers in backward
  // Data of named fields (data/schema.h): what a model taking the batch binds its inputs to and
  // the target its output is trained against. Null for x/y data.
  std::shared_ptr<const SampleSchema> fields;
  std::string output_name;  // a program with several outputs: the one trained ("" = the first)
  int64_t positions = 0;    // gpt: learned positions (--positions); 0 = the data's sequence length
  // llama (Config's fields of the same names): 0 = the family's default.
  int64_t kv_heads = 0, mlp_width = 0;
  double rope_theta = 0, norm_eps = 0;
  std::vector<double> rope_scaling;  // empty, or factor, low_freq_factor, high_freq_factor, original positions
  bool tie_embeddings = false;
};

struct Family {
  std::string name;                         // --model
  std::function<NetPtr(const ModelSpec&)> make;
  std::vector<size_t> ranks;                // sample ranks it takes; empty = any
  std::string input;                        // how such a sample reads: "C x H x W"
  // The model flags it reads beyond --width: depth, heads, dropout, positions. (--stem and
  // --grad_checkpointing follow from `stem` and `blocks`.)
  std::vector<std::string> options;
  bool stem = false;    // a stem to choose (--stem: small up to 64 px, else imagenet)
  bool blocks = false;  // residual blocks or encoder layers: --grad_checkpointing recomputes them
  bool pieces = false;  // declares pieces: pipeline stages can split it
  bool width = true;    // builds its layers from --width (a model read from a file does not)
  // Takes the batch's fields by name (a program's forward arguments); otherwise one tensor, x.
  bool named_inputs = false;
  // Its output is linear(hidden states, weight), no bias (a language model's head): the loss can
  // compute that head itself, in chunks (Net::forward_head, --fused_head_loss).
  bool linear_head = false;
  // The layers of layer-wise learning-rate decay from input to output, as timm groups them:
  // each entry a parameter-name prefix, "a+b" for one layer of several, "x.*" for one layer per
  // child x.N (residual blocks, encoder layers). Parameters under no entry (the head) share the
  // last layer (layer_ids below).
  std::vector<std::string> layers;
  // The classifier: a fine-tune on new classes starts it afresh, --freeze backbone trains it.
  std::vector<std::string> head;
  // Its PyTorch twin, and the renames from gputrain's parameter names to the twin's (empty:
  // the names are the same).
  std::string twin;
  std::vector<std::pair<std::string, std::string>> twin_names;
  // Tied weights of a model read from a file: (another name, the parameter's own). The model
  // registers the parameter once (one tensor to the optimizer and in checkpoints); --init_from
  // takes it under either name, and `export` writes it under both, as state_dict does.
  std::vector<std::pair<std::string, std::string>> tied;
  // A causal language model whose labels are its input ids, as Hugging Face keeps them: the data
  // shifts each sample's labels one position on (data/shift_labels.h) before the loss sees them.
  bool shift_labels = false;
};

// Every family, in the order `gputrain models` lists them.
const std::vector<const Family*>& families();
// The family of --model `name`; a usage error naming the models (and the nearest) otherwise.
const Family& family(const std::string& name);
std::vector<std::string> model_names();
// The families `takes` holds for, in the table's order.
std::vector<std::string> model_names_where(const std::function<bool(const Family&)>& takes);

// Model flags given to a family that has no use for them (--heads with a resnet), one line each:
// refused, never ignored. Checked before a model is built (`gputrain models` takes them for
// every model at once). A usage error for an unknown model.
std::vector<std::string> model_option_problems(const Config& c);

// A model read from a file: its layers for --layer_decay are the module's top-level children in
// the order of `parameters` (their state_dict names), and the last one is the head.
void set_layers_from_names(Family& f, const std::vector<std::string>& parameters);

// Whether parameter `name` is `prefix` or lies inside it ("fc.weight" is under "fc", "fc2.bias"
// is not).
bool under_prefix(const std::string& name, const std::string& prefix);
// Whether `name` is a parameter or buffer of f's head.
bool in_head(const Family& f, const std::string& name);

// One entry of Family::layers as its prefixes: "a+b.*" is {a, false}, {b, true} (one layer per
// child of b).
struct LayerPrefix {
  std::string prefix;
  bool per_child = false;
};
std::vector<LayerPrefix> layer_prefixes(const std::string& entry);

// Each parameter's layer in f.layers' grouping (0 = the input's), for `names` in the model's
// order; those under no entry take the last layer, as timm gives the head.
std::vector<int64_t> layer_ids(const Family& f, const std::vector<std::string>& names);

// --stem auto for samples of `shape` (C x H x W): the stem and why.
std::pair<std::string, std::string> choose_stem(const std::vector<int64_t>& shape);

}  // namespace gputrain
