// --init_from and fine-tuning, checked against PyTorch itself: every family's eval outputs and
// its weights after 3 SGD steps equal its PyTorch twin's (tests/python/reference_check.py);
// .pth, .safetensors and gputrain checkpoints of the same weights give the same start; bad files
// are refused with exit 2 and one line; frozen parameters take no gradient and no optimizer
// state, in one process and on 2 ranks; a resume across the unfreeze ends on the same weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include <sys/stat.h>
#include <map>
#include <set>
#include <string>

#include <torch/torch.h>

#include "config/config.h"
#include "core/error.h"
#include "test_python.h"
#include "test_util.h"
#include "test_weights.h"
#include "weights/safetensors.h"
#include "step/fine_tune.h"
#include "train/session.h"
#include "weights/torch_save.h"
#include "weights/unpickler.h"

using namespace gputrain;
using test::check_same_weights;
using test::have_python;
using test::kPython;
using test::kRoot;
using test::python;

namespace {

test::RunResult run_ok(const std::string& args, const std::string& env = "") {
  auto r = test::run_gputrain(args, env);
  INFO(args << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// The mlp of tests/python/make_weights_fixtures.py: 8 features, width 16, 10 classes.
const std::string kMlp =
    "train --dataset synthetic --input_shape 8 --num_classes 10 --synthetic_train_size 64 --synthetic_test_size 16 "
    "--model mlp --width 16 --batch_size 16 --num_workers 0 --threads 1 --no-use_amp --no-shuffle --device cpu "
    "--device_preset none ";

// A cnn (width 4, BatchNorm) on synthetic 1x8x8 samples of 3 classes, in batches of 16.
Config small_cnn(const std::string& device, int64_t train_size) {
  Config c;
  c.dataset = "synthetic";
  c.input_shape = "1x8x8";
  c.num_classes = 3;
  c.synthetic_train_size = train_size;
  c.synthetic_test_size = 16;
  c.model = "cnn";
  c.width = 4;
  c.batch_size = 16;
  c.num_workers = 0;
  c.device = device;
  c.device_preset = "none";
  return c;
}

// The unpickler on a hand-written pickle: the global `module.name` called with one string.
std::string pickle_calling(const std::string& module, const std::string& name) {
  std::string p = "\x80\x02";
  p += "c" + module + "\n" + name + "\n";
  p += "X" + std::string("\x04\x00\x00\x00", 4) + "echo";
  p += "\x85R.";  // TUPLE1, REDUCE, STOP
  return p;
}

std::string refusal(const std::string& pickle) {
  const StorageReader none = [](const std::string&, torch::ScalarType, int64_t) -> torch::Tensor {
    throw std::logic_error("no storage expected");
  };
  try {
    unpickle_weights("w.pth", reinterpret_cast<const uint8_t*>(pickle.data()), pickle.size(), none, "");
  } catch (const Error& e) {
    CHECK(e.exit_code == kExitUsage);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("init_from: each family's outputs and weights after 3 SGD steps equal its PyTorch twin's", "[weights][cli]") {
  if (!have_python()) return;
  for (const std::string family : {"mlp", "cnn", "resnet18", "resnet34", "resnet50", "lstm", "gru", "transformer", "cnn3d"}) {
    test::TempDir dir;
    std::string log;
    const int code = python("reference_check.py " + family + " " + test::gputrain_exe() + " " + dir.path.string(), log);
    INFO(log);
    CHECK(code == 0);
    CHECK_THAT(log, Catch::Contains(family + ": pass"));
  }
}

TEST_CASE("init_from: the unpickler refuses every global outside the allowlist, by name", "[weights]") {
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"os", "system"}, {"builtins", "eval"}, {"subprocess", "Popen"}, {"__builtin__", "exec"},
           {"__main__", "Evil"}, {"torch", "load"}, {"collections", "defaultdict"}})
    CHECK_THAT(refusal(pickle_calling(module, name)),
               Catch::StartsWith("w.pth: forbidden global '" + module + "." + name + "'"));
  // The allowed ones build data only: an OrderedDict called with arguments is refused too.
  CHECK_THAT(refusal(pickle_calling("collections", "OrderedDict")), Catch::Contains("OrderedDict called with arguments"));
  CHECK_THAT(refusal(std::string("\x80\x02}q\x00h\x05.", 7)), Catch::Contains("memo 5 read before it was written"));
  CHECK_THAT(refusal(std::string("\x80\x02]", 3)), Catch::Contains("truncated pickle"));
  CHECK_THAT(refusal(std::string("\x80\x02\x8a\x09", 4)), Catch::Contains("an integer of 9 bytes"));
  CHECK_THAT(refusal("\x80\x02i"), Catch::Contains("opcode 0x69"));  // INST: a class by name
}

TEST_CASE("init_from: bad files are exit 2 with one line naming the file, and change nothing", "[weights][cli]") {
  if (!have_python()) return;
  test::TempDir dir;
  std::string log;
  REQUIRE(python("make_weights_fixtures.py " + dir.path.string(), log) == 0);
  // The good ones load, with the report.
  for (const std::string good : {"good.pth", "good.safetensors", "wrapped.pth", "imagenet_example.pth", "timm_train.pth"}) {
    auto r = run_ok(kMlp + "--max_steps 1 --init_from " + (dir / good) + " --output_dir " + (dir / ("run_" + good)));
    CHECK_THAT(r.out, Catch::Contains("init_from: " + (dir / good)) && Catch::Contains("loaded   6 tensors"));
  }
  // timm's train.py checkpoint: its args (an argparse.Namespace) read as data; --init_ema takes
  // the moving average saved beside the weights.
  auto timm = run_ok(kMlp + "--max_steps 1 --init_from " + (dir / "timm_train.pth") + " --init_ema --output_dir " +
                     (dir / "run_timm_ema"));
  CHECK_THAT(timm.out, Catch::Contains("under 'state_dict_ema'") && Catch::Contains("loaded   6 tensors"));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"truncated.pth", "not a zip archive"},
      {"not_weights.txt", "not a weights file"},
      {"legacy.pth", "legacy format"},
      {"torchscript.pt", "TorchScript module"},
      {"forbidden_os.system.pth", "forbidden global 'os.system'"},
      {"forbidden_builtins.eval.pth", "forbidden global 'builtins.eval'"},
      {"forbidden_subprocess.Popen.pth", "forbidden global 'subprocess.Popen'"},
      {"forbidden___builtin__.exec.pth", "forbidden global '__builtin__.exec'"},
      {"forbidden___main__.Evil.pth", "forbidden global '__main__.Evil'"},
      {"header_past_end.safetensors", "runs past the end of the file"},
      {"huge_shape.safetensors", "need 8589934592"},
      {"huge_shape.pth", "reaches element"},
      {"huge_storage.pth", "claims"},
      {"wrong_dtype.safetensors", "dtype Int in the file vs Float"},
      {"shape_mismatch.pth", "'fc2.weight': shape"},
      {"view_of_view.pth", "a tensor's storage is a tensor, not a storage"},
      {"overflow.pth", "sizes multiply past 2^50 elements"},
      {"deflated.pth", "zip compression method 8"},
      {"overlap.pth", "overlapping members"},
      {"code_checkpoint.pt", "defines methods (TorchScript code"},
  };
  for (const auto& [file, says] : bad) {
    const std::string run = dir / ("run_" + file);
    auto r = test::run_gputrain(kMlp + "--max_steps 1 --init_from " + (dir / file) + " --output_dir " + run);
    INFO(file << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: ") && Catch::Contains(dir / file) && Catch::Contains(says));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') <= 2);  // the error line and its hint
    CHECK(!std::filesystem::exists(run));
  }
  CHECK(!std::filesystem::exists(dir / "ran_code_from_the_file"));  // the __setstate__ never ran
  // A pipe with no writer is refused at once, not waited on.
  REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);
  auto pipe = test::run_gputrain(kMlp + "--max_steps 1 --init_from " + (dir / "pipe") + " --output_dir " + (dir / "run_pipe"));
  CHECK(pipe.exit_code == 2);
  CHECK_THAT(pipe.err, Catch::Contains("pipe: not a regular file"));
  // --init_strict false loads what matches and says what it left.
  auto relaxed = run_ok(kMlp + "--max_steps 1 --init_from " + (dir / "shape_mismatch.pth") + " --no-init_strict --output_dir " +
                        (dir / "relaxed"));
  CHECK_THAT(relaxed.out, Catch::Contains("loaded   5 tensors") && Catch::Contains("not loaded (--no-init_strict): 'fc2.weight'"));
}

TEST_CASE("init_from: a .pth, a .safetensors and a gputrain checkpoint of the same weights start alike", "[weights][cli]") {
  if (!have_python()) return;
  test::TempDir dir;
  // A cnn (BatchNorm buffers too) trained a little: its checkpoint, exported, then re-saved by PyTorch.
  const std::string cnn =
      "train --dataset synthetic --input_shape 1x8x8 --num_classes 3 --synthetic_train_size 64 --synthetic_test_size 16 "
      "--model cnn --width 4 --batch_size 16 --num_workers 0 --threads 1 --no-use_amp --no-shuffle --device cpu "
      "--device_preset none --optimizer sgd --lr 0.05 ";
  run_ok(cnn + "--max_steps 3 --output_dir " + (dir / "first"));
  const std::string ckpt = dir / "first/checkpoints/last.pt";
  run_ok("export --checkpoint " + ckpt + " --out " + (dir / "w.safetensors"));
  std::string log;
  REQUIRE(python("make_weights_fixtures.py --convert " + (dir / "w.safetensors") + " " + (dir / "w.pth"), log) == 0);
  for (const std::string from : {"w.safetensors", "w.pth", "first/checkpoints/last.pt"}) {
    auto r = run_ok(cnn + "--max_steps 1 --seed 5 --init_from " + (dir / from) + " --output_dir " + (dir / ("run_" + from.substr(0, 4))) +
                    " --export " + (dir / ("out_" + from.substr(0, 4) + ".st")));
    CHECK_THAT(r.out, Catch::Contains("loaded   16 tensors") && Catch::Contains("initial  none"));
  }
  check_same_weights(dir / "out_w.sa.st", dir / "out_w.pt.st", 0, 0);
  check_same_weights(dir / "out_w.sa.st", dir / "out_firs.st", 0, 0);
  // The run's record says where it started.
  const auto config = nlohmann::json::parse(test::read_file(dir / "run_w.pt/config.json"));
  CHECK(config["init_from"]["format"] == "torch.save");
  CHECK(config["init_from"]["loaded"] == 16);
  auto events = test::read_jsonl(dir / "run_firs/metrics.jsonl");
  CHECK(events.front()["event"] == "init_from");
  CHECK(events.front()["format"] == "gputrain checkpoint");
}

TEST_CASE("freeze: frozen parameters take no gradient and no optimizer state, the lr follows the layers", "[weights]") {
  Config c = small_cnn("cpu", 64);  // 4 batches: 3 steps below
  c.use_amp = false;
  c.freeze = "backbone";
  c.freeze_bn = true;
  c.optimizer = "adamw";
  c.layer_decay = 0.5;
  Session s(c);
  Trainer& t = s.trainer();
  std::map<std::string, torch::Tensor> before;
  for (const auto& [name, v] : model_tensors(t.model())) before[name] = v.clone();
  Loader loader(s.data().train, s.train_loader_options());
  loader.start_epoch(0);
  for (int i = 0; i < 2; ++i) t.step({*loader.next()});
  for (const auto& [name, v] : model_tensors(t.model())) {
    INFO(name);
    const bool head = name.rfind("fc2.", 0) == 0;
    CHECK(torch::equal(v, before.at(name)) == !head);  // running statistics too (--freeze_bn)
  }
  size_t with_state = 0;
  for (const auto& g : t.optimizer().param_groups())
    for (const auto& p : g.params()) with_state += t.optimizer().state().count(p.unsafeGetTensorImpl());
  CHECK(with_state == 2);  // fc2.weight and fc2.bias
  // Layers features, fc1, fc2: the rates lr x 0.5^2, 0.5, 1 (decayed and not, per layer).
  t.set_lr(0.1);
  std::set<double> rates;
  for (const auto& g : t.optimizer().param_groups()) rates.insert(g.options().get_lr());
  CHECK(rates == std::set<double>{0.025, 0.05, 0.1});
  // Everything trains once unfrozen, BatchNorm statistics included.
  set_frozen(t.model(), {}, false);
  t.trainable_changed();
  t.step({*loader.next()});
  CHECK(!torch::equal(t.model().named_buffers()["features.1.running_mean"], before.at("features.1.running_mean")));
  CHECK(!torch::equal(t.model().named_parameters()["features.0.weight"], before.at("features.0.weight")));

  c.freeze = "nothing";
  CHECK_THROWS_WITH(Session(c), Catch::Contains("--freeze 'nothing': 'nothing' names no parameter of model cnn"));
}

TEST_CASE("freeze: a resume across --unfreeze_at_epoch ends on the weights of the uninterrupted run", "[weights][resume][cli]") {
  test::TempDir dir;
  const std::string args = kMlp + "--epochs 3 --optimizer adamw --lr 0.01 --freeze fc1,fc2 --unfreeze_at_epoch 1 ";
  auto whole = run_ok(args + "--output_dir " + (dir / "whole") + " --export " + (dir / "whole.st"));
  CHECK_THAT(whole.out, Catch::Contains("epoch 2: 4 frozen parameters train from here (--unfreeze_at_epoch 1)"));
  // Stopped inside the frozen epoch, then inside the unfrozen one.
  auto first = test::run_gputrain(args + "--output_dir " + (dir / "split"), "GPUTRAIN_FAULT_SIGTERM_STEP=2");
  REQUIRE(first.exit_code == 143);
  auto second = test::run_gputrain(args + "--resume auto --output_dir " + (dir / "split"), "GPUTRAIN_FAULT_SIGTERM_STEP=6");
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 143);
  // The learning-rate shares fix the optimizer's groups: a resume cannot change them.
  auto changed = test::run_gputrain(args + "--resume auto --backbone_lr_scale 0.5 --output_dir " + (dir / "split"));
  CHECK(changed.exit_code == 2);
  CHECK_THAT(changed.err, Catch::Contains("--backbone_lr_scale 0.5 differs from the resumed run's 1"));
  run_ok(args + "--resume auto --output_dir " + (dir / "split") + " --export " + (dir / "split.st"));
  check_same_weights(dir / "whole.st", dir / "split.st", 0, 0);
}

TEST_CASE("freeze: 2 ranks all-reduce only what trains, and train the weights of 1 process", "[weights][dist][cli]") {
  test::TempDir dir;
  const std::string args = "train --dataset synthetic --input_shape 32 --num_classes 5 --synthetic_train_size 256 "
                           "--synthetic_test_size 16 --model mlp --width 32 --optimizer adamw --lr 0.01 --epochs 2 "
                           "--num_workers 0 --threads 1 --no-use_amp --freeze backbone --unfreeze_at_epoch 1 ";
  run_ok(args + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  run_ok("launch --nproc_per_node 2 -- " + args + "--batch_size 32 --ddp_bucket_mb 0.001 --output_dir " + (dir / "two") +
         " --export " + (dir / "two.st"));
  check_same_weights(dir / "one.st", dir / "two.st");
}

TEST_CASE("fine-tune: a torchvision-layout resnet18 state_dict, head first, then eval, infer, export back to PyTorch",
          "[weights][cli]") {
  if (!have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = python("fine_tune_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  CHECK(code == 0);
  CHECK_THAT(log, Catch::Contains("argmax equal on 20 images"));
}

TEST_CASE("cuda: frozen parameters with the fused CUDA optimizer, the fp16 grad scaler and CUDA graphs", "[cuda]") {
  // Graphed and eager runs, head first then everything: the same weights, the frozen ones untouched
  // until the unfreeze (the graph captured again with the new set of gradients).
  auto train = [](bool graphs) {
    Config c = small_cnn("cuda", 256);
    c.amp_dtype = "fp16";
    c.amp_check = false;
    c.cudnn_benchmark = false;
    c.cudnn_deterministic = true;
    c.cuda_graphs = graphs;
    c.freeze = "backbone";
    Session s(c);
    Trainer& t = s.trainer();
    REQUIRE(s.recipe().precision.scaler);
    std::map<std::string, torch::Tensor> start;
    for (const auto& [name, v] : model_tensors(t.model())) start[name] = v.detach().clone();
    Loader loader(s.data().train, s.train_loader_options());
    loader.start_epoch(0);
    t.set_lr(0.01);
    for (int i = 0; i < 6; ++i) t.step({*loader.next()});
    for (const auto& p : t.model().named_parameters()) {
      INFO(p.key());
      CHECK(torch::equal(p.value(), start.at(p.key())) == (p.key().rfind("fc2.", 0) != 0));
    }
    set_frozen(t.model(), {}, false);
    t.trainable_changed();
    for (int i = 0; i < 6; ++i) t.step({*loader.next()});
    CHECK(!torch::equal(t.model().named_parameters()["features.0.weight"], start.at("features.0.weight")));
    std::map<std::string, torch::Tensor> end;
    for (const auto& [name, v] : model_tensors(t.model())) end[name] = v.detach().cpu();
    return end;
  };
  const auto eager = train(false), graphed = train(true);
  for (const auto& [name, v] : eager) {
    INFO(name);
    CHECK(torch::allclose(v.to(torch::kFloat), graphed.at(name).to(torch::kFloat), 1e-4, 1e-5));
  }
}

TEST_CASE("freeze: pipeline stages with a frozen first stage train the weights of one process", "[weights][pipeline][cli]") {
  test::TempDir dir;
  // The backbone (fc1, fc2) frozen: the first stage holds only frozen parameters, so its backward
  // has nothing to compute until the unfreeze.
  const std::string args = kMlp + "--epochs 2 --freeze backbone --unfreeze_at_epoch 1 --optimizer adamw --lr 0.01 ";
  run_ok(args + "--output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  run_ok(args + "--pipeline_stages 2 --output_dir " + (dir / "two") + " --export " + (dir / "two.st"));
  check_same_weights(dir / "one.st", dir / "two.st");
}

TEST_CASE("init_from: tensors sharing a storage stay shared, and the stem follows the file", "[weights][cli]") {
  if (!have_python()) return;
  test::TempDir dir;
  const std::string tied = dir / "tied.pth", resnet = dir / "resnet.pth";
  const std::string cmd = kPython + " -c \"import sys, torch; sys.path.insert(0, '" + kRoot + "/tests/python'); "
                          "from twins import make_twin; w = torch.arange(6.0); "
                          "torch.save({'a': w, 'b': w, 'c': w[2:]}, '" + tied + "'); torch.manual_seed(0); "
                          "torch.save(make_twin('resnet18', (3, 224, 224), 10, width=8, stem='imagenet').state_dict(), '" +
                          resnet + "')\" >" + (dir / "log") + " 2>&1";
  const int status = std::system(cmd.c_str());
  INFO(test::read_file(dir / "log"));
  REQUIRE(status == 0);
  const StateDict s = read_torch_save(tied, false);
  REQUIRE(s.tensors.size() == 3);
  CHECK(s.tensors[0].second.data_ptr() == s.tensors[1].second.data_ptr());
  CHECK(static_cast<const float*>(s.tensors[2].second.data_ptr()) == static_cast<const float*>(s.tensors[0].second.data_ptr()) + 2);
  CHECK(s.tensors[2].second[0].item<float>() == 2);

  // A 7x7 conv1 on 16-pixel images: --stem auto takes the ImageNet stem from the file; an
  // explicit small stem is refused, naming the flag that fits. In fp32: on 16 pixels layer4's
  // stride-2 conv sees a 1x1 map, where the pinned torch's oneDNN bf16 weight gradient reads
  // uninitialized memory (NaN or 1e24 in about half the runs, in PyTorch alone too).
  const std::string args = "train --dataset synthetic --input_shape 3x16x16 --num_classes 10 --synthetic_train_size 32 "
                           "--synthetic_test_size 16 --model resnet18 --width 8 --batch_size 16 --max_steps 1 "
                           "--num_workers 0 --no-use_amp --init_from " + resnet;
  auto from_file = run_ok(args + " --output_dir " + (dir / "auto"));
  CHECK_THAT(from_file.out, Catch::Contains("stem                  auto -> imagenet (--init_from: its conv1.weight is 7x7)"));
  auto small = test::run_gputrain(args + " --stem small --output_dir " + (dir / "small"));
  CHECK(small.exit_code == 2);
  CHECK_THAT(small.err, Catch::Contains("'conv1.weight': shape 8x3x7x7 in the file vs 8x3x3x3") &&
                            Catch::Contains("pass --stem imagenet"));
  auto wide = test::run_gputrain(args + " --width 16 --output_dir " + (dir / "wide"));
  CHECK_THAT(wide.err, Catch::Contains("the file's width is 8; pass --width 8"));
}

TEST_CASE("init_from: --init_ema starts from a checkpoint's moving average", "[weights][cli]") {
  test::TempDir dir;
  run_ok(kMlp + "--max_steps 4 --optimizer sgd --lr 0.1 --ema_decay 0.5 --output_dir " + (dir / "first"));
  const std::string ckpt = dir / "first/checkpoints/last.pt";
  run_ok("export --checkpoint " + ckpt + " --weights ema --out " + (dir / "ema.st"));
  // A step at learning rate 0 leaves an mlp (no BatchNorm) as it started.
  auto r = run_ok(kMlp + "--max_steps 1 --optimizer sgd --lr 0 --init_from " + ckpt + " --init_ema --output_dir " +
                  (dir / "from_ema") + " --export " + (dir / "start.st"));
  CHECK_THAT(r.out, Catch::Contains("(gputrain checkpoint, EMA weights)"));
  check_same_weights(dir / "ema.st", dir / "start.st", 0, 0);
  run_ok(kMlp + "--max_steps 2 --output_dir " + (dir / "plain"));
  auto none = test::run_gputrain(kMlp + "--max_steps 1 --init_from " + (dir / "plain/checkpoints/last.pt") +
                                 " --init_ema --output_dir " + (dir / "refused"));
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("has no moving average"));
}
