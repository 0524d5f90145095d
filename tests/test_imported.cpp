// --model net.pt2: networks defined in Python, exported with torch.export, trained by gputrain's
// graph interpreter. Checked against PyTorch eager (tests/python/imported_check.py), in fp32
// and under bf16 autocast: a ConvNeXt-style net, a small ViT, a tabular net with embeddings and
// the quickstart CNN, also as TorchScript modules; tools/export_model.py; and
// every kind of bad archive is exit 2 with one line naming the file, before anything is written;
// a graph whose operators reach outside their tensors is refused before any node runs, and a
// TorchScript net.pt only loads with --trust_program; autocast reaches the graph's operators;
// data parallel and a resume act on it as on a built-in.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include "config/config.h"
#include "core/autocast.h"
#include "data/loader.h"
#include "models/op_allowlist.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/session.h"
#include "weights/pt2_archive.h"
#include "weights/safetensors.h"
#include "step/trainer.h"
#include "test_python.h"
#include "test_util.h"
#include "test_weights.h"

using namespace gputrain;

namespace {

// tests/python/imported_check.py on `net` with `options`: its line must say "<net> (<label>): pass".
void check_net(const std::string& net, const std::string& options, const std::string& label) {
  test::TempDir dir;
  std::string log;
  const int code =
      test::python("imported_check.py " + net + " " + test::gputrain_exe() + " " + dir.path.string() + options, log);
  INFO(log);
  CHECK(code == 0);
  CHECK_THAT(log, Catch::Contains(net + " (" + label + "): pass"));
}

// make_pt2_fixtures.py's archives in `dir`, and the train command for its regression data
// (the model flag last, for the caller to give).
std::string fixture_data(const test::TempDir& dir) {
  std::string log;
  REQUIRE(test::python("make_pt2_fixtures.py " + dir.path.string(), log) == 0);
  return "train --dataset npy --train_file " + (dir / "x.npy") + " --train_targets " + (dir / "y.npy") +
         " --task regression --loss mse ";
}

// The same, training good.pt2.
std::string fixtures(const test::TempDir& dir) {
  return fixture_data(dir) + "--model " + (dir / "good.pt2") + " --num_workers 0 --threads 1 --no-shuffle ";
}

}  // namespace

TEST_CASE("imported: ConvNeXt, ViT, tabular and CNN programs from Python train like PyTorch eager", "[imported][cli]") {
  if (!test::have_python()) return;
  // evalmodes: the eval forms beyond batch_norm and dropout (attention's dropout_p, an LSTM's
  // dropout, InstanceNorm's running statistics), a -inf mask and sizes as tensor operands.
  for (const std::string net : {"convnext", "vit", "tabular", "cnn", "evalmodes"}) check_net(net, "", "imported");
}

TEST_CASE("imported: the same nets under bf16 autocast equal PyTorch eager under bf16 autocast", "[imported][cli]") {
  if (!test::have_python()) return;
  for (const std::string net : {"convnext", "vit", "tabular", "cnn"}) check_net(net, " --bf16", "imported, bf16");
}

TEST_CASE("imported: TorchScript modules of the same nets train like PyTorch eager, other .pt files are refused",
          "[imported][cli]") {
  if (!test::have_python()) return;
  for (const std::string net : {"cnn", "vit"}) check_net(net, " --torchscript", "TorchScript");
  test::TempDir dir;
  const std::string data = " --dataset synthetic --input_shape 8 --num_classes 3 --synthetic_train_size 32 "
                           "--synthetic_test_size 8 --epochs 1 --batch_size 8 --output_dir ";
  auto run = test::run_gputrain("train --model mlp --width 8" + data + (dir / "run"));
  REQUIRE(run.exit_code == 0);
  const std::string checkpoint = dir / "run/checkpoints/last.pt";
  // With the trust given, what the file is still decides: a checkpoint or junk is no module.
  auto r = test::run_gputrain("train --trust_program --model " + checkpoint + data + (dir / "again"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: " + checkpoint + ": a gputrain checkpoint, not a model"));
  test::write_file(dir / "junk.pt", "not a zip");
  r = test::run_gputrain("train --trust_program --model " + (dir / "junk.pt") + data + (dir / "junk"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: " + (dir / "junk.pt") + ": "));
}

TEST_CASE("imported: tools/export_model.py writes the pair gputrain reads, and refuses what it cannot run",
          "[imported]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("export_model_check.py " + dir.path.string(), log);
  INFO(log);
  CHECK(code == 0);
  CHECK_THAT(log, Catch::Contains("export_model_check: pass"));
}

TEST_CASE("imported: a net.py exported, trained on an image folder, then eval, infer and export back to PyTorch",
          "[imported][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("imported_e2e.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  CHECK(code == 0);
  CHECK_THAT(log, Catch::StartsWith("pass: "));
}

TEST_CASE("imported: bad archives are exit 2 with one line naming the file, and write nothing", "[imported][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  const std::string train = fixture_data(dir) + "--epochs 1 --batch_size 8 --model ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", "not a zip archive"},
      {"not_zip", "not a zip archive"},
      {"bad_json", "models/model.json: malformed JSON"},
      {"schema9", "export schema version 9.20; gputrain reads version 8.x"},
      {"inference", "a program exported for inference"},
      {"unknown_op", "node 'linear' (torch.ops.aten.no_such_operator.default) from make_pt2_fixtures.py:"},
      {"custom_op", "a custom operator ('mylib' namespace)"},
      {"hop", "node 'relu' (torch.ops.higher_order.cond)"},
      {"shape", "'fc1.weight' holds a tensor of shape [8, 16], the graph reads one of shape [16, 8]"},
      {"too_big", "a Float tensor of shape [16, 800] needs more than the 512 bytes stored for it"},
      {"deflated", "zip compression method 8"},
      {"static_batch", "exported with a fixed batch size of 4"},
      {"int_input", "the model's input 'ids' is Long; the data gives one float32 tensor (x)"},
      {"zero_stride", "a Float tensor of shape [32768, 32768] needs more than the 512 bytes stored for it"},
      {"deep", "models/model.json: JSON nested deeper than 64 levels"},
      {"empty_spec", "malformed program"},
      {"unknown_arg", "node 'relu' (torch.ops.aten.relu.default) from make_pt2_fixtures.py:"},
      {"overlap", "fc2.weight: another view of the tensor stored for 'fc1.weight'"},
  };
  for (const auto& [name, why] : cases) {
    INFO(name);
    const std::string file = dir / (name + ".pt2"), run = dir / ("run_" + name);
    auto r = test::run_gputrain(train + file + " --output_dir " + run);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: " + file + ": ") && Catch::Contains(why));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 2);  // the line and its hint
    CHECK(!std::filesystem::exists(run));
  }
  // The archive they were made from trains.
  auto ok = test::run_gputrain(train + (dir / "good.pt2") + " --output_dir " + (dir / "run_good"));
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("evaluates the training graph in eval mode"));
  // Tied weights (fc3.weight and fc4.weight are fc1.weight) train as one parameter, saved once
  // and exported under each name.
  auto tied = test::run_gputrain(train + (dir / "tied.pt2") + " --output_dir " + (dir / "run_tied"));
  INFO(tied.out << tied.err);
  REQUIRE(tied.exit_code == 0);
  const auto saved = read_checkpoint_weights(dir / "run_tied/checkpoints/last.pt").raw;
  CHECK(std::count_if(saved.begin(), saved.end(), [](const auto& t) { return t.first.find("weight") != std::string::npos; }) == 2);
  auto exported = test::run_gputrain("export --checkpoint " + (dir / "run_tied/checkpoints/last.pt") + " --out " +
                                     (dir / "tied.safetensors"));
  REQUIRE(exported.exit_code == 0);
  auto both = load_safetensors(dir / "tied.safetensors");
  REQUIRE(both.count("fc1.weight") == 1);
  REQUIRE(both.count("fc3.weight") == 1);
  REQUIRE(both.count("fc4.weight") == 1);
  CHECK(torch::equal(both["fc1.weight"], both["fc3.weight"]));
  CHECK(torch::equal(both["fc1.weight"], both["fc4.weight"]));
  for (const auto& [name, start] : read_pt2(dir / "tied.pt2").weights)
    if (name == "fc1.weight" || name == "fc3.weight") CHECK(!torch::equal(both["fc1.weight"], start));  // it trained
  // A program of two outputs trains on its first, or on --output_name; a name it lacks is refused.
  auto first = test::run_gputrain(train + (dir / "two_outputs.pt2") + " --output_dir " + (dir / "run_two"));
  INFO(first.out << first.err);
  CHECK(first.exit_code == 0);
  auto other = test::run_gputrain(train + (dir / "two_outputs.pt2") + " --output_name 1 --output_dir " + (dir / "run_h"));
  CHECK(other.exit_code == 2);  // h is [batch, 16], not the data's [batch, 3]
  CHECK_THAT(other.err, Catch::Contains("returns outputs of shape [1, 16] per batch; the data needs 3 per sample"));
  auto none = test::run_gputrain(train + (dir / "two_outputs.pt2") + " --output_name logits --output_dir " + (dir / "run_n"));
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("--output_name 'logits': " + (dir / "two_outputs.pt2") + " returns outputs 0, 1"));
}

TEST_CASE("imported: the operator allowlist admits aten's operators whose effects stay in their tensors", "[imported]") {
  const size_t admitted = admitted_op_count();
  INFO(admitted << " operators admitted");
  CHECK(admitted > 1000);  // 2960 with torch 2.15 (tests/python/op_allowlist_check.py counts them)
  CHECK(admitted < 10000);
  auto admits = [](const char* name, const char* overload) { return op_admitted(c10::OperatorName(name, overload)); };
  CHECK_FALSE(admits("aten::from_file", ""));
  CHECK_FALSE(admits("aten::_print", ""));
  CHECK_FALSE(admits("aten::record_stream", ""));
  CHECK_FALSE(admits("aten::set_", "source_Storage"));            // a Storage argument
  CHECK_FALSE(admits("profiler::_record_function_enter", ""));    // another namespace
  // Operators that skip their checks: a red-team graph crashed a run through _reshape_alias.
  CHECK_FALSE(admits("aten::_reshape_alias", ""));
  CHECK_FALSE(admits("aten::set_", "source_Tensor_storage_offset"));
  CHECK_FALSE(admits("aten::_unsafe_index", "Tensor"));
  CHECK_FALSE(admits("aten::_index_put_impl_", ""));
  CHECK_FALSE(admits("aten::sparse_coo_tensor", "indices_size"));  // check_invariants
  CHECK(admits("aten::conv2d", ""));
  CHECK(admits("aten::einsum", ""));  // its int[] `path` is a contraction order, not a file
  CHECK(admits("aten::_assert_scalar", ""));  // dynamic shapes' checks, str message and all
  // Every operator of the 17 torchvision and timm architectures that train through .pt2 (train
  // and eval graphs; op_allowlist_check.py --models exports them and lists these).
  for (const auto& [name, overload] : std::vector<std::pair<const char*, const char*>>{
           {"aten::adaptive_avg_pool2d", ""}, {"aten::add", "Tensor"}, {"aten::add_", "Tensor"},
           {"aten::avg_pool2d", ""}, {"aten::batch_norm", ""}, {"aten::bernoulli_", "float"}, {"aten::cat", ""},
           {"aten::chunk", ""}, {"aten::contiguous", ""}, {"aten::conv2d", ""}, {"aten::div_", "Tensor"},
           {"aten::dropout", ""}, {"aten::dropout_", ""}, {"aten::empty", "memory_format"}, {"aten::eq", "Scalar"},
           {"aten::expand", ""}, {"aten::expand_as", ""}, {"aten::fill_", "Scalar"}, {"aten::flatten", "using_ints"},
           {"aten::gelu", ""}, {"aten::group_norm", ""}, {"aten::hardsigmoid", ""}, {"aten::hardswish_", ""},
           {"aten::index", "Tensor"}, {"aten::layer_norm", ""}, {"aten::linear", ""}, {"aten::masked_fill", "Scalar"},
           {"aten::matmul", ""}, {"aten::max_pool2d", ""}, {"aten::mean", "dim"}, {"aten::mul", "Tensor"},
           {"aten::ne", "Scalar"}, {"aten::new_zeros", ""}, {"aten::pad", ""}, {"aten::permute", ""},
           {"aten::relu", ""}, {"aten::relu_", ""}, {"aten::reshape", ""}, {"aten::roll", ""},
           {"aten::scaled_dot_product_attention", ""}, {"aten::select", "int"}, {"aten::sigmoid", ""},
           {"aten::silu", ""}, {"aten::silu_", ""}, {"aten::slice", "Tensor"}, {"aten::softmax", "int"},
           {"aten::split_with_sizes", ""}, {"aten::squeeze", "dim"}, {"aten::sub", "Tensor"},
           {"aten::sum", "dim_IntList"}, {"aten::sym_size", "int"}, {"aten::transpose", "int"},
           {"aten::unbind", "int"}, {"aten::unflatten", "int"}, {"aten::unsqueeze", ""}, {"aten::view", ""}}) {
    INFO(name << "." << overload);
    CHECK(admits(name, overload));
  }
  auto why = [](const char* name, const char* overload) {
    return op_refusal(c10::Dispatcher::singleton().findSchema({name, overload})->schema());
  };
  CHECK_THAT(why("aten::from_file", ""), Catch::Contains("aten::from_file reaches outside its tensors"));
  CHECK_THAT(why("aten::set", "source_Storage"), Catch::Contains("takes a Storage ('source')"));  // set_ is denied by name
  CHECK_THAT(why("profiler::_record_function_enter", ""), Catch::Contains("'profiler' namespace"));
  CHECK(why("aten::conv2d", "").empty());
}

TEST_CASE("imported: a graph whose operators reach outside their tensors is refused before any node runs",
          "[imported][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  const std::string train = fixture_data(dir) + "--epochs 1 --batch_size 8 --model ";
  // The model given, the file the error names, its node and operator, and why.
  const std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string>> cases = {
      {"from_file.pt2", "from_file.pt2", "from_file", "torch.ops.aten.from_file.default",
       "aten::from_file reaches outside its tensors: it maps a file"},
      {"print.pt2", "print.pt2", "_print", "torch.ops.aten._print.default", "aten::_print reaches outside its tensors: it writes to stdout"},
      {"record_function.pt2", "record_function.pt2", "relu", "torch.ops.profiler._record_function_enter.default",
       "an operator of the 'profiler' namespace"},
      // The eval program beside a good training program is checked the same way.
      {"eval_from_file.pt2", "eval_from_file.eval.pt2", "from_file", "torch.ops.aten.from_file.default",
       "aten::from_file reaches outside its tensors: it maps a file"},
  };
  for (const auto& [model, file, node, op, why] : cases) {
    INFO(model);
    const std::string run = dir / ("run_" + model);
    auto r = test::run_gputrain(train + (dir / model) + " --output_dir " + run);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: " + (dir / file) + ": node '" + node + "' (" + op +
                                        ") from make_pt2_fixtures.py:") &&
                          Catch::Contains(why) && Catch::Contains("hint: gputrain runs a graph as data"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 2);  // the line and its hint
    CHECK(!std::filesystem::exists(run));
    CHECK(!std::filesystem::exists(dir / "from_file_marker"));  // from_file never ran
    CHECK_THAT(r.out + r.err, !Catch::Contains("print.pt2 ran aten::_print"));  // nor _print
  }
}

TEST_CASE("imported: a TorchScript net.pt is a program: loaded only with --trust_program, which a file cannot give",
          "[imported][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  const std::string script = dir / "script.pt", data = fixture_data(dir) + "--epochs 1 --batch_size 8 --num_workers 0 ";
  const std::string train = data + "--model " + script;
  auto r = test::run_gputrain(train + " --output_dir " + (dir / "untrusted"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: " + script + " is a TorchScript program: its code runs when it "
                                      "is loaded, so --model takes it only with --trust_program\nhint: pass "
                                      "--trust_program if you trust its author, or export the module with torch.export "
                                      "to " + script + "2"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 2);
  CHECK(!std::filesystem::exists(dir / "untrusted"));

  // Trusted on the command line (kebab-case too), it trains, and the run records the flag.
  auto ok = test::run_gputrain(train + " --trust-program --output_dir " + (dir / "trusted"));
  INFO(ok.out << ok.err);
  REQUIRE(ok.exit_code == 0);
  const auto config = nlohmann::json::parse(test::read_file(dir / "trusted/config.json"));
  CHECK(config["requested"]["trust_program"] == true);
  CHECK(config["resolved"]["trust_program"] == true);

  // eval, infer and a resume load the module again: the run's record does not trust it for them.
  const std::string last = dir / "trusted/checkpoints/last.pt";
  for (const std::string& command : {"eval --checkpoint " + last, "infer --checkpoint " + last + " --out " + (dir / "p.csv"),
                                     "train --resume " + last + " --epochs 2"}) {
    INFO(command);
    auto refused = test::run_gputrain(command);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("--model takes it only with --trust_program"));
  }
  for (const std::string& command : {"eval --checkpoint " + last, "infer --checkpoint " + last + " --out " + (dir / "p.csv"),
                                     "train --resume " + last + " --epochs 2"}) {
    auto trusted = test::run_gputrain(command + " --trust_program");
    INFO(command << "\n" << trusted.out << trusted.err);
    CHECK(trusted.exit_code == 0);
  }

  // A record forged to call the model a net.pt2 (untrusted) still loads the run's model.pt: the
  // trust is asked of the file that would load, not of the record's name for it; and a record
  // naming its program file at a path of its choosing is refused.
  std::filesystem::copy(dir / "trusted", dir / "forged", std::filesystem::copy_options::recursive);
  const std::string forged = dir / "forged/checkpoints/last.pt";
  std::string log;
  REQUIRE(test::python("crafted_checkpoints.py --forge-record " + forged, log) == 0);
  for (const std::string& command : {"eval --checkpoint " + forged, "infer --checkpoint " + forged + " --out " +
                                     (dir / "p.csv"), "train --resume " + forged + " --epochs 2"}) {
    INFO(command);
    auto refused = test::run_gputrain(command);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::StartsWith("gputrain: error: " + (dir / "forged/model.pt") +
                                              " is the run's TorchScript program: its code runs when it is loaded, so "
                                              "it loads only with --trust_program"));
  }
  REQUIRE(test::python("crafted_checkpoints.py --forge-record " + forged + " ../trusted/model.pt", log) == 0);
  auto elsewhere = test::run_gputrain("eval --checkpoint " + forged);
  CHECK(elsewhere.exit_code == 2);
  CHECK_THAT(elsewhere.err, Catch::Contains("the run's program record names the file '../trusted/model.pt'"));

  // Neither a --config file nor a preset can give the trust; and the flag is for a .pt model.
  test::write_file(dir / "trust.json", R"({"trust_program": true})");
  auto file = test::run_gputrain(train + " --config " + (dir / "trust.json") + " --output_dir " + (dir / "file"));
  CHECK(file.exit_code == 2);
  CHECK_THAT(file.err, Catch::Contains("key 'trust_program' only works as a command-line flag"));
  auto pt2 = test::run_gputrain(data + "--model " + (dir / "good.pt2") + " --trust_program --output_dir " + (dir / "pt2"));
  CHECK(pt2.exit_code == 2);
  CHECK_THAT(pt2.err, Catch::Contains("--trust_program is for a TorchScript --model net.pt"));
}

TEST_CASE("imported: --sync_bn, pipeline stages and --grad_checkpointing are refused for a model from a file", "[imported][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  const std::string train = fixture_data(dir) + "--epochs 1 --batch_size 8 --model " + (dir / "good.pt2");
  for (const auto& [flag, why] : std::vector<std::pair<std::string, std::string>>{
           {"--sync_bn", "--sync_bn is for the built-in models"},
           {"--grad_checkpointing", "--grad_checkpointing is for"},
           {"--pipeline_stages 2", "cannot be split into stages"}}) {
    auto r = test::run_gputrain(train + " " + flag + " --output_dir " + (dir / "run"));
    INFO(flag << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(why));
  }
}

TEST_CASE("imported: autocast reaches the graph's operators, and eval mode runs the eval graph", "[imported]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  fixtures(dir);
  auto net = make_model(dir / "good.pt2", ModelSpec{{8}, 3});
  CHECK(parameter_count(*net) == 8 * 16 + 16 + 16 * 3 + 3);
  CHECK(net->named_parameters().contains("fc1.weight"));  // the module's own names
  const auto x = torch::randn({5, 8});
  const auto fp32 = net->forward(x);
  CHECK(fp32.scalar_type() == torch::kFloat);
  CHECK(fp32.sizes() == torch::IntArrayRef({5, 3}));
  {
    AutocastGuard autocast(true, torch::kCPU, torch::kBFloat16);
    const auto bf16 = net->forward(x);
    CHECK(bf16.scalar_type() == torch::kBFloat16);  // linear autocasts at the dispatcher
    CHECK(torch::allclose(bf16.to(torch::kFloat), fp32, 0.05, 0.05));
  }
  // The same weights in PyTorch's module: y = fc2(relu(fc1(x))).
  auto p = net->named_parameters();
  const auto ref = torch::linear(torch::relu(torch::linear(x, p["fc1.weight"], p["fc1.bias"])), p["fc2.weight"], p["fc2.bias"]);
  CHECK(torch::allclose(fp32, ref, 1e-5, 1e-6));
  net->eval();
  CHECK(torch::allclose(net->forward(x), ref, 1e-5, 1e-6));
}

TEST_CASE("imported: 2 ranks train the weights of 1 process, a resume ends on the uninterrupted run's, --init_from, bf16",
          "[imported][dist][resume][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  const std::string args = fixtures(dir) + "--optimizer adamw --lr 0.01 --epochs 3 --no-use_amp ";
  auto run_ok = [](const std::string& a, const std::string& env = "") {
    auto r = test::run_gputrain(a, env);
    INFO(a << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  run_ok(args + "--batch_size 16 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  run_ok("launch --nproc_per_node 2 -- " + args + "--batch_size 8 --output_dir " + (dir / "two") + " --export " +
         (dir / "two.st"));
  test::check_same_weights(dir / "one.st", dir / "two.st");

  auto stopped = test::run_gputrain(args + "--batch_size 16 --output_dir " + (dir / "split"), "GPUTRAIN_FAULT_SIGTERM_STEP=3");
  REQUIRE(stopped.exit_code == 143);
  run_ok(args + "--batch_size 16 --resume auto --output_dir " + (dir / "split") + " --export " + (dir / "split.st"));
  test::check_same_weights(dir / "one.st", dir / "split.st", 0, 0);

  // --init_from a run's export: the model starts from those weights (at lr 0 it keeps them).
  auto init = run_ok(args + "--batch_size 16 --epochs 1 --lr 0 --init_from " + (dir / "one.st") + " --output_dir " +
                     (dir / "init") + " --export " + (dir / "init.st"));
  CHECK_THAT(init.out, Catch::Contains("loaded   4 tensors"));
  test::check_same_weights(dir / "one.st", dir / "init.st", 0, 0);

  // bf16 autocast: the same run within bf16's rounding.
  auto bf16 = run_ok(fixtures(dir) + "--optimizer adamw --lr 0.01 --epochs 3 --use_amp --amp_dtype bf16 --batch_size 16 "
                     "--output_dir " + (dir / "bf16") + " --export " + (dir / "bf16.st"));
  CHECK_THAT(bf16.out, Catch::Contains("bf16 autocast"));
  test::check_same_weights(dir / "one.st", dir / "bf16.st", 0.05, 0.02);
}

TEST_CASE("imported: the run keeps its program: a moved or re-exported --model changes nothing, a changed copy is "
          "refused",
          "[imported][resume][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  namespace fs = std::filesystem;
  const std::string run = dir / "run", ckpt = " --checkpoint " + run + "/checkpoints/last.pt";
  const std::string train = fixture_data(dir) + "--model " + (dir / "net.pt2") +
                            " --num_workers 0 --threads 1 --epochs 3 --batch_size 8 --output_dir " + run;
  fs::copy_file(dir / "good.pt2", dir / "net.pt2");
  auto stopped = test::run_gputrain(train, "GPUTRAIN_FAULT_SIGTERM_STEP=5");
  INFO(stopped.out << stopped.err);
  REQUIRE(stopped.exit_code == 143);
  // The copy and its hash, as sha256sum computes it.
  CHECK(test::read_file(run + "/model.pt2") == test::read_file(dir / "net.pt2"));
  CHECK_FALSE(fs::exists(run + "/model.eval.pt2"));
  const auto config = nlohmann::json::parse(test::read_file(run + "/config.json"));
  REQUIRE(std::system(("sha256sum " + (dir / "net.pt2") + " > " + (dir / "sum")).c_str()) == 0);
  CHECK(config["program"]["sha256"] == test::read_file(dir / "sum").substr(0, 64));
  CHECK(config["program"]["file"] == "model.pt2");
  CHECK(config["program"]["from"] == (dir / "net.pt2"));
  auto eval = [&](const std::string& extra) { return test::run_gputrain("eval" + ckpt + " --json " + (dir / "e.json") + extra); };
  REQUIRE(eval("").exit_code == 0);
  const std::string before = test::read_file(dir / "e.json");

  // The original moved away, another program exported under its name: the run uses its copy.
  fs::rename(dir / "net.pt2", dir / "moved.pt2");
  fs::copy_file(dir / "tanh.pt2", dir / "net.pt2");
  auto again = eval("");
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(test::read_file(dir / "e.json") == before);
  CHECK(test::run_gputrain("infer" + ckpt + " --out " + (dir / "p.csv")).exit_code == 0);
  auto resumed = test::run_gputrain("train --resume auto --output_dir " + run);
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, !Catch::Contains("changed:"));
  REQUIRE(eval("").exit_code == 0);
  const std::string finished = test::read_file(dir / "e.json");  // the resumed run's last.pt

  // The copy changed: refused, nothing written; --model with the run's bytes stands in.
  fs::copy_file(dir / "tanh.pt2", run + "/model.pt2", fs::copy_options::overwrite_existing);
  auto refused = test::run_gputrain("infer" + ckpt + " --out " + (dir / "q.csv"));
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains(run + "/model.pt2 is not the run's program: its bytes changed (sha256 " +
                                          config["program"]["sha256"].get<std::string>()));
  CHECK_FALSE(fs::exists(dir / "q.csv"));
  auto wrong = eval(" --model " + (dir / "net.pt2"));
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("--model " + (dir / "net.pt2") + " is not the run's program"));
  auto given = eval(" --model " + (dir / "moved.pt2"));
  INFO(given.out << given.err);
  CHECK(given.exit_code == 0);
  CHECK(test::read_file(dir / "e.json") == finished);
  // Gone, with the original gone too: the line names what it needs.
  fs::remove(run + "/model.pt2");
  auto gone = eval("");
  CHECK(gone.exit_code == 2);
  CHECK_THAT(gone.err, Catch::Contains("the run's program is gone") && Catch::Contains("pass --model FILE"));
}

TEST_CASE("cuda: an imported model with the fp16 grad scaler and CUDA graphs trains the weights of eager steps", "[cuda]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  fixtures(dir);
  // Graphed and eager runs of the same steps: the same weights (the graph's ops are the
  // dispatcher calls the eager forward makes, captured once).
  auto train = [&](bool graphs) {
    Config c;
    c.dataset = "npy";
    c.train_file = dir / "x.npy";
    c.train_targets = dir / "y.npy";
    c.task = "regression";
    c.loss = "mse";
    c.model = dir / "good.pt2";
    c.device = "cuda";
    c.device_preset = "none";
    c.amp_dtype = "fp16";
    c.amp_check = false;
    c.cudnn_benchmark = false;
    c.cudnn_deterministic = true;
    c.cuda_graphs = graphs;
    c.batch_size = 8;
    c.shuffle = false;
    c.num_workers = 0;
    Session s(c);
    Trainer& t = s.trainer();
    REQUIRE(s.recipe().precision.scaler);
    Loader loader(s.data().train, s.train_loader_options());
    loader.start_epoch(0);
    t.set_lr(0.01);
    int replays = 0;
    for (int i = 0; i < 3; ++i) {
      t.step({*loader.next()});
      replays += t.replayed();
    }
    CHECK(replays == 0);  // 3 warm-ups before the capture
    loader.start_epoch(1);
    for (int i = 0; i < 3; ++i) {
      t.step({*loader.next()});
      replays += t.replayed();
    }
    CHECK(replays == (graphs ? 3 : 0));
    std::map<std::string, torch::Tensor> end;
    for (const auto& p : t.model().named_parameters()) end[p.key()] = p.value().detach().cpu();
    return end;
  };
  const auto eager = train(false), graphed = train(true);
  REQUIRE(eager.size() == 4);
  for (const auto& [name, v] : eager) {
    INFO(name);
    CHECK(torch::allclose(v, graphed.at(name), 1e-4, 1e-5));
  }
}

TEST_CASE("typed batches: ragged ids, a mask and per-token labels train a two-input program as PyTorch eager does, on "
          "1 and 2 ranks and as TorchScript, and a missing input is named",
          "[imported][dist][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("token_batches_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  CHECK(code == 0);
}

TEST_CASE("Hugging Face programs: BERT, DistilBERT, DeBERTa-v2 and GPT-2 (tied head, shifted labels) exported by "
          "tools/export_model.py --hf train as transformers does, on 1 and 2 ranks, under bf16, from --init_from",
          "[imported][python][dist][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("hf_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  if (code == 77) {
    WARN("transformers is not installed (.pydeps-text): Hugging Face programs not compared with transformers");
    return;
  }
  CHECK(code == 0);
}

TEST_CASE("text data: a CSV of reviews tokenized by a BERT folder's tokenizer trains that BERT as transformers "
          "does, evaluates and infers, and bad texts, labels, vocabularies and inputs are one line (tests/python/text_check.py)",
          "[imported][python][data][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("text_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  if (code == 77) {
    WARN("transformers is not installed (.pydeps-text): --dataset text not checked against transformers");
    return;
  }
  CHECK(code == 0);
}

TEST_CASE("text data: a CSV tokenized by gputrain with a SentencePiece model trains as the same CSV tokenized by "
          "transformers, multi-label, class weights, macro-F1 and padding share against references, hostile tables "
          "one line (tests/python/text_table_check.py)",
          "[imported][python][data][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("text_table_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  if (code == 77) {
    WARN("transformers, sentencepiece or protobuf is not installed (.pydeps-text): tables of texts not checked");
    return;
  }
  CHECK(code == 0);
}
