// The graph of a torch.export program, compiled once for running op by op through the c10
// dispatcher, so that autograd and autocast apply to it as to any LibTorch call. Each node's
// operator handle, argument layout and constants are settled at load; a step looks nothing up
// by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>

namespace gputrain {

// What one graph input is bound to, in the graph's input order.
struct GraphInput {
  enum class Kind { Parameter, Buffer, Constant, User };
  Kind kind = Kind::User;
  std::string name;  // the state_dict name of a parameter or buffer, a constant's name, the user input's
  std::vector<int64_t> shape;  // as exported, -1 for a dynamic dimension
  // A user input's: its dtype, and the largest size each dimension takes (the exported size, or
  // a dynamic one's range_constraints maximum; -1 where it is unbounded).
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> largest;
};

class ExportedGraph {
 public:
  // Compiles `program` (a PT2 archive's models/<name>.json) read from `path`. With `eval`, the
  // training-form graph is run as module.eval() would run it: batch_norm on running statistics,
  // dropout off, num_batches_tracked not counted. Throws a usage error naming the node, its
  // operator and its Python source line for what cannot run here (an operator LibTorch lacks, a
  // higher-order op, a custom op, one off the allowlist of models/op_allowlist.h: files, the
  // console, process state), and for programs that are not exported for training.
  ExportedGraph(const nlohmann::json& program, const std::string& path, bool eval);
  ~ExportedGraph();
  ExportedGraph(ExportedGraph&&) noexcept;

  const std::vector<GraphInput>& inputs() const;
  // The user inputs (the forward's arguments, by name), in the graph's order.
  std::vector<const GraphInput*> user_inputs() const;
  // The user outputs: their names (a dict's keys; a tuple's positions "0", "1", ...; "0" for
  // one tensor) and their shapes as exported, -1 for a dynamic dimension.
  const std::vector<std::string>& output_names() const;
  const std::vector<std::vector<int64_t>>& output_shapes() const;
  // The buffers the graph writes back (a functional program's mutations), by state_dict name.
  const std::vector<std::string>& mutated_buffers() const;
  // The rows of the embedding that looks up user input `name` directly (a text model's
  // input_ids: its vocabulary), or -1 when no embedding reads it.
  int64_t embedding_rows(const std::string& name) const;

  // Runs the graph on `bound` (one value per input, in inputs() order; Device arguments follow
  // `device`). Returns the user outputs, then the new value of each mutated buffer.
  std::vector<at::Tensor> run(std::vector<c10::IValue> bound, c10::Device device) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputrain
