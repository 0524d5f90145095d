// Pipeline stages on the CPU (a thread per stage): the gradients and weights of one device
// accumulating over the same micro-batches, for both schedules; 1F1B holds fewer activations
// than GPipe; a pipeline checkpoint evaluates on one device; what cannot be split says so.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "test_util.h"
#include "test_weights.h"
#include "weights/safetensors.h"
#include "step/loss.h"
#include "models/registry.h"
#include "parallel/pipeline.h"

using namespace gputrain;
using test::check_same_weights;

namespace {

NetPtr model(const std::string& name, std::vector<int64_t> shape) {
  torch::manual_seed(7);
  ModelSpec s;
  s.input_shape = std::move(shape);
  s.num_classes = 5;
  s.width = name == "transformer" ? 16 : 8;
  s.depth = 3;
  return make_model(name, s);
}

// One device: the micro-batches' losses, each weighted by its share, backward one after another.
torch::Tensor accumulate(Net& net, const torch::Tensor& x, const torch::Tensor& y, int64_t micro) {
  torch::Tensor sum;
  auto xs = x.chunk(micro), ys = y.chunk(micro);
  for (size_t i = 0; i < xs.size(); ++i) {
    auto loss = task_loss(net.forward(xs[i]), ys[i]) * (static_cast<double>(ys[i].size(0)) / static_cast<double>(y.size(0)));
    loss.backward();
    sum = sum.defined() ? sum + loss.detach() : loss.detach();
  }
  return sum;
}

torch::Tensor piped(Net& net, int stages, PipelineSchedule schedule, const torch::Tensor& x, const torch::Tensor& y,
                    int64_t micro, PipelineStats* stats = nullptr) {
  PipelineOptions o;
  o.stages = split_model(net.pieces(), "test", std::vector<torch::Device>(static_cast<size_t>(stages), torch::kCPU));
  o.micro_batches = micro;
  o.schedule = schedule;
  Pipeline p(net.pieces(), o);
  const double n = static_cast<double>(y.size(0));
  auto loss = p.run(
      x, y, [&](const torch::Tensor& out, const torch::Tensor& t) { return task_loss(out, t) * (static_cast<double>(t.size(0)) / n); },
      [](const torch::Tensor& l) { return l; });
  if (stats) *stats = p.last_stats();
  return loss;
}

void check_same(Net& a, Net& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (const auto& item : pa) {
    INFO(item.key());
    REQUIRE(item.value().grad().defined());
    CHECK(torch::allclose(item.value().grad(), pb[item.key()].grad(), 1e-5, 1e-6));
  }
  auto ba = a.named_buffers(), bb = b.named_buffers();
  for (const auto& item : ba) {
    INFO(item.key());
    CHECK(torch::allclose(item.value().to(torch::kDouble), bb[item.key()].to(torch::kDouble), 1e-5, 1e-6));
  }
}

}  // namespace

TEST_CASE("pipeline: the cuts make the largest stage as small as they can", "[pipeline]") {
  auto ranges = [](const std::vector<Stage>& s) {
    std::vector<std::pair<size_t, size_t>> r;
    for (const auto& x : s) r.push_back({x.begin, x.end});
    return r;
  };
  using R = std::vector<std::pair<size_t, size_t>>;
  CHECK(ranges(cut_stages({1, 1, 1, 1}, 2)) == R{{0, 2}, {2, 4}});
  CHECK(ranges(cut_stages({5, 1, 1, 1, 1, 1}, 2)) == R{{0, 1}, {1, 6}});
  CHECK(ranges(cut_stages({1, 2, 3, 4, 5}, 3)) == R{{0, 3}, {3, 4}, {4, 5}});
  CHECK(ranges(cut_stages({0, 0, 9}, 3)) == R{{0, 1}, {1, 2}, {2, 3}});  // never an empty stage
}

TEST_CASE("pipeline: 2 and 3 stages x 4 micro-batches give one device's gradients, both schedules", "[pipeline]") {
  struct Case {
    const char* name;
    std::vector<int64_t> shape;
  };
  for (const auto& c : {Case{"mlp", {12}}, Case{"transformer", {6, 4}}, Case{"cnn", {1, 8, 8}}}) {
    for (int stages : {2, 3}) {
      for (auto schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1f1b}) {
        INFO(c.name << ", " << stages << " stages, " << (schedule == PipelineSchedule::kGpipe ? "gpipe" : "1f1b"));
        std::vector<int64_t> dims = {32};
        dims.insert(dims.end(), c.shape.begin(), c.shape.end());
        torch::manual_seed(3);
        auto x = torch::randn(dims), y = torch::randint(0, 5, {32});
        auto one = model(c.name, c.shape), two = model(c.name, c.shape);
        one->train();
        two->train();
        auto l1 = accumulate(*one, x, y, 4);
        auto l2 = piped(*two, stages, schedule, x, y, 4);
        CHECK(l2.item<double>() == Approx(l1.item<double>()).epsilon(1e-6));
        check_same(*one, *two);  // gradients, and BatchNorm's running statistics (the CNN)
      }
    }
  }
}

TEST_CASE("pipeline: 1F1B holds fewer activation bytes at once than GPipe", "[pipeline]") {
  auto x = torch::randn({256, 64}), y = torch::randint(0, 5, {256});
  int64_t peak[2];
  for (auto schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1f1b}) {
    torch::manual_seed(7);
    ModelSpec s;
    s.input_shape = {64};
    s.num_classes = 5;
    s.width = 256;
    auto net = make_model("mlp", s);
    PipelineStats stats;
    piped(*net, 2, schedule, x, y, 8, &stats);
    peak[schedule == PipelineSchedule::k1f1b] = stats.peak_bytes;
    CHECK(stats.busy_seconds.size() == 2);
    CHECK(stats.seconds > 0);
  }
  WARN("peak bytes of one step, 2 stages x 8 micro-batches: GPipe " << peak[0] << ", 1F1B " << peak[1]);
  CHECK(peak[0] > 0);
  CHECK(peak[1] < peak[0]);
}

TEST_CASE("pipeline: a stage's error stops the others and is the one reported", "[pipeline]") {
  auto net = model("mlp", {12});
  PipelineOptions o;
  o.stages = split_model(net->pieces(), "mlp", {torch::kCPU, torch::kCPU});
  o.micro_batches = 4;
  Pipeline p(net->pieces(), o);
  auto x = torch::randn({16, 12}), y = torch::randint(0, 5, {16});
  auto fail = [](const torch::Tensor&, const torch::Tensor&) -> torch::Tensor { throw std::runtime_error("loss failed"); };
  CHECK_THROWS_WITH(p.run(x, y, fail, [](const torch::Tensor& l) { return l; }), "loss failed");
  // The pipeline still works afterwards.
  auto ok = p.run(x, y, [](const torch::Tensor& out, const torch::Tensor& t) { return task_loss(out, t); },
                  [](const torch::Tensor& l) { return l; });
  CHECK(std::isfinite(ok.item<double>()));
}

namespace {

const std::string kTrain =
    "train --dataset synthetic --num_classes 5 --synthetic_train_size 640 --synthetic_test_size 64 --optimizer adamw "
    "--lr 0.01 --clip_max_norm 1 --max_steps 10 --epochs 1 --num_workers 0 --threads 1 --no-use_amp --log_every 5 ";

}  // namespace

TEST_CASE("pipeline: 10 steps on 2 and 3 stages, both schedules, train the weights of one device accumulating the same "
          "micro-batches",
          "[pipeline][cli]") {
  test::TempDir dir;
  for (const char* model : {"--model mlp --input_shape 12 --width 16 ",
                            // The attention key bias's gradient is zero up to rounding, which Adam
                            // would turn into full steps that differ with the order of the sums.
                            "--model transformer --input_shape 6x4 --width 16 --depth 2 --optimizer sgd --lr 0.05 ",
                            "--model cnn --input_shape 1x8x8 --width 4 "}) {
    INFO(model);
    auto one = test::run_gputrain(kTrain + model + "--batch_size 16 --accumulation_steps 4 --output_dir " + (dir / "one") +
                                  " --export " + (dir / "one.st"));
    INFO(one.out << one.err);
    REQUIRE(one.exit_code == 0);
    for (const char* stages : {"2", "3"}) {
      for (const char* schedule : {"gpipe", "1f1b"}) {
        INFO(stages << " stages, " << schedule);
        const std::string run = dir / (std::string("piped") + stages + schedule);
        auto pp = test::run_gputrain(kTrain + model + "--pipeline_stages " + stages + " --pipeline_schedule " + schedule +
                                     " --micro_batches 4 --batch_size 64 --output_dir " + run + " --export " + run + ".st");
        INFO(pp.out << pp.err);
        REQUIRE(pp.exit_code == 0);
        CHECK_THAT(pp.out, Catch::Contains(std::string(stages) + " stages x 4 micro-batches, " + schedule));
        check_same_weights(dir / "one.st", run + ".st");
      }
    }
    // The checkpoint holds the model whole: eval runs it on one device, to the loss training saw.
    const std::string run = dir / "piped31f1b";
    auto e = test::run_gputrain("eval --checkpoint " + run + "/checkpoints/last.pt --json " + (dir / "e.json"));
    INFO(e.out << e.err);
    REQUIRE(e.exit_code == 0);
    CHECK_THAT(e.out, !Catch::Contains("pipeline "));
    double trained = 0;
    for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
      if (r["event"] == "eval") trained = r["test_loss"].get<double>();
    CHECK(nlohmann::json::parse(test::read_file(dir / "e.json"))["test_loss"].get<double>() == Approx(trained).epsilon(1e-6));
    test::remove_tree(dir.path / "one");
    for (const char* d : {"piped2gpipe", "piped21f1b", "piped3gpipe", "piped31f1b"}) test::remove_tree(dir.path / d);
  }
}

TEST_CASE("pipeline: the smoke preset trains on 2 stages, and what cannot be split is exit 2 in one line", "[pipeline][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain("train --pipeline_stages 2 --micro_batches 4 --preset smoke --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("pipeline              2 stages x 4 micro-batches, 1f1b: cpu"));
  // Every logged step says how busy each stage was; the report has the stage table.
  for (const auto& rec : test::read_jsonl(dir / "run/metrics.jsonl"))
    if (rec["event"] == "step") CHECK(rec["pipeline"]["busy"].size() == 2);
  CHECK_THAT(test::read_file(dir / "run/report.html"), Catch::Contains("<h2>Pipeline stages</h2>"));

  auto b = test::run_gputrain("benchmark --preset smoke --pipeline_stages 3 --micro_batches 6 --pipeline_schedule gpipe "
                              "--variants baseline --steps 4 --warmup_steps 1 --json " + (dir / "b.json"));
  INFO(b.out << b.err);
  REQUIRE(b.exit_code == 0);
  CHECK_THAT(b.out, Catch::Contains("pipeline (baseline): 3 stages x 6 micro-batches, gpipe: bubble"));
  const auto p = nlohmann::json::parse(test::read_file(dir / "b.json"))["variants"][0]["pipeline"];
  CHECK(p["theoretical_bubble"].get<double>() == Approx(2.0 / 8.0));
  CHECK(p["busy"].size() == 3);
  CHECK(p["bubble"].get<double>() >= 0);
  CHECK(p["bubble"].get<double>() < 1);

  // --stage_balance time: cut by a measured profile of the pieces, and the run still trains.
  auto timed = test::run_gputrain("train --preset smoke --model resnet18 --width 4 --pipeline_stages 3 --stage_balance time "
                                  "--max_steps 2 --output_dir " + (dir / "timed"));
  INFO(timed.out << timed.err);
  CHECK(timed.exit_code == 0);
  CHECK_THAT(timed.out, Catch::Contains("cut by measured piece times (ms: "));

  auto lstm = test::run_gputrain("train --preset smoke --dataset synthetic --input_shape 8x4 --model lstm --pipeline_stages 2 "
                                 "--output_dir " + (dir / "lstm"));
  CHECK(lstm.exit_code == 2);
  CHECK_THAT(lstm.err, Catch::Contains("--pipeline_stages 2: model 'lstm' cannot be split into stages"));
  auto deep = test::run_gputrain("train --preset smoke --model mlp --pipeline_stages 4 --output_dir " + (dir / "deep"));
  CHECK(deep.exit_code == 2);
  CHECK_THAT(deep.err, Catch::Contains("model 'mlp' splits into at most 3 stages") &&
                          Catch::Contains("hint: use at most 3 stages ('mlp' has no --depth)"));
  auto micro = test::run_gputrain("train --preset smoke --micro_batches 4 --output_dir " + (dir / "micro"));
  CHECK(micro.exit_code == 2);
  CHECK_THAT(micro.err, Catch::Contains("--micro_batches 4 needs --pipeline_stages 2 or more"));
  CHECK_FALSE(std::filesystem::exists(dir / "lstm"));
  // CPU stages share one random generator: recomputed dropout masks could differ, so refused.
  auto recompute = test::run_gputrain("train --preset smoke --dataset synthetic --input_shape 8x4 --model transformer "
                                      "--dropout 0.1 --grad_checkpointing --pipeline_stages 2 --output_dir " + (dir / "rc"));
  CHECK(recompute.exit_code == 2);
  CHECK_THAT(recompute.err, Catch::Contains("--grad_checkpointing with --dropout 0.1 and pipeline stages on a CPU"));
}

TEST_CASE("pipeline: a one-device run resumes with stages and ends where the one-device run does", "[pipeline][cli]") {
  test::TempDir dir;
  const std::string mlp = kTrain + "--model mlp --input_shape 12 --width 16 --batch_size 64 --max_steps 0 --lr_schedule constant --warmup_steps 0 ";
  auto whole = test::run_gputrain(mlp + "--epochs 2 --output_dir " + (dir / "whole") + " --export " + (dir / "whole.st"));
  REQUIRE(whole.exit_code == 0);
  REQUIRE(test::run_gputrain(mlp + "--epochs 1 --output_dir " + (dir / "run")).exit_code == 0);
  auto resumed = test::run_gputrain(mlp + "--epochs 2 --resume auto --pipeline_stages 2 --micro_batches 4 --output_dir " +
                                    (dir / "run") + " --export " + (dir / "resumed.st"));
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("resumed from") && Catch::Contains("pipeline              2 stages"));
  check_same_weights(dir / "whole.st", dir / "resumed.st");
}

TEST_CASE("pipeline: SIGTERM mid-run saves, exits 143, and the resume ends where an uninterrupted run does", "[pipeline][cli]") {
  test::TempDir dir;
  const std::string mlp = kTrain + "--model mlp --input_shape 12 --width 16 --batch_size 64 --max_steps 0 --lr_schedule constant "
                          "--warmup_steps 0 --epochs 100 --pipeline_stages 2 --micro_batches 4 --log_every 2 ";
  auto whole = test::run_gputrain(mlp + "--output_dir " + (dir / "whole") + " --export " +
                                  (dir / "whole.st"));
  INFO(whole.out << whole.err);
  REQUIRE(whole.exit_code == 0);

  const std::string run = dir / "run";
  const pid_t pid = test::start_shell("exec " + std::string(test::gputrain_exe()) + " " + mlp + "--output_dir " + run + " >" + (dir / "out") + " 2>&1");
  REQUIRE(test::wait_for_step(run));
  const int code = test::sigterm_and_wait(pid);
  INFO(test::read_file(dir / "out"));
  REQUIRE(code == 143);
  CHECK(std::filesystem::exists(run + "/checkpoints/last.pt"));
  CHECK_THAT(test::read_file(dir / "out"), Catch::Contains("stopped (SIGTERM) at step"));

  auto resumed = test::run_gputrain(mlp + "--resume auto --output_dir " + run + " --export " +
                                    (dir / "resumed.st"));
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("resumed from"));
  check_same_weights(dir / "whole.st", dir / "resumed.st");
}

// Two GPUs or more: the stages on cuda:0 and cuda:1 (activations and gradients copied between
// them), against one GPU accumulating the same micro-batches; and fp16, whose overflow check
// sees the gradients of both devices.
TEST_CASE("cuda: pipeline stages on 2 GPUs train the weights of one GPU, fp16 too", "[cuda]") {
  if (torch::cuda::device_count() < 2) {
    WARN("skipped: pipeline stages on GPUs need 2, this machine has " << static_cast<int>(torch::cuda::device_count()));
    return;
  }
  test::TempDir dir;
  const std::string gpu = kTrain + "--device cuda --no-tf32 --model transformer --input_shape 6x4 --width 16 --depth 2 "
                                   "--optimizer sgd --lr 0.05 ";  // SGD: see the 10-step test above
  auto one = test::run_gputrain(gpu + "--batch_size 16 --accumulation_steps 4 --output_dir " + (dir / "one") + " --export " +
                                (dir / "one.st"));
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  auto two = test::run_gputrain(gpu + "--pipeline_stages 2 --micro_batches 4 --batch_size 64 --output_dir " + (dir / "two") +
                                " --export " + (dir / "two.st"));
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  CHECK_THAT(two.out, Catch::Contains("cuda:0") && Catch::Contains("cuda:1"));
  // Busy fractions from CUDA events: each stage's device time within the step's wall time.
  int logged = 0;
  for (const auto& r : test::read_jsonl(dir / "two/metrics.jsonl")) {
    if (r["event"] != "step" || !r.contains("pipeline")) continue;
    ++logged;
    for (double busy : r["pipeline"]["busy"]) {
      CHECK(busy > 0);
      CHECK(busy <= 1.0);
    }
    CHECK(r["pipeline"]["bubble"].get<double>() >= 0);
  }
  CHECK(logged > 0);
  auto wa = load_safetensors(dir / "one.st"), wb = load_safetensors(dir / "two.st");
  for (const auto& [name, t] : wa) {
    INFO(name);
    CHECK(torch::allclose(t, wb.at(name), 1e-4, 1e-5));
  }
  auto fp16 = test::run_gputrain("train --preset smoke --device cuda --use_amp --amp_dtype fp16 --pipeline_stages 2 "
                                 "--output_dir " + (dir / "fp16"));
  INFO(fp16.out << fp16.err);
  CHECK(fp16.exit_code == 0);

  // Resume on the GPUs: a checkpoint of stages on cuda:0 and cuda:1 (each stage's optimizer
  // state on its device) continues to where an uninterrupted run ends.
  const std::string piped = gpu + "--pipeline_stages 2 --micro_batches 4 --batch_size 64 --max_steps 0 ";
  auto whole = test::run_gputrain(piped + "--epochs 2 --output_dir " + (dir / "whole") + " --export " + (dir / "whole.st"));
  INFO(whole.out << whole.err);
  REQUIRE(whole.exit_code == 0);
  REQUIRE(test::run_gputrain(piped + "--epochs 1 --output_dir " + (dir / "half")).exit_code == 0);
  auto resumed = test::run_gputrain(piped + "--epochs 2 --resume auto --output_dir " + (dir / "half") + " --export " +
                                    (dir / "resumed.st"));
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("resumed from"));
  check_same_weights(dir / "whole.st", dir / "resumed.st");
}
