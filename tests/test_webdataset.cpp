// WebDataset shards: patterns, the tar index, the stream order, training equal to the image
// folder's, an exact resume on 2 ranks, and damaged shards.
#include <catch2/catch.hpp>

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/shard_pattern.h"
#include "data/tar_index.h"
#include "data/webdataset.h"
#include "test_errors.h"
#include "test_images.h"
#include "test_python.h"
#include "test_util.h"
#include "test_weights.h"

using namespace gputrain;
using test::error_of;
namespace fs = std::filesystem;

namespace {

// An image folder of `per_class` 12x10 pictures in each of 3 classes (a class's own colour
// plus noise), every third one a JPEG, under root/train and root/val.
void write_folder(const std::string& root, int per_class) {
  for (const char* split : {"train", "val"})
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < (std::string(split) == "val" ? per_class / 2 : per_class); ++i) {
        auto px = test::noise(12 * 10 * 3, static_cast<uint32_t>(c * 1000 + i + (split[0] == 'v' ? 500 : 0)));
        for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<uint8_t>(px[k] / 4 + (k % 3 == static_cast<size_t>(c) ? 150 : 40));
        const std::string dir = root + "/" + split + "/class" + std::to_string(c);
        fs::create_directories(dir);
        if (i % 3 == 0)
          test::write_file(fmt::format("{}/{:03d}.jpg", dir, i), test::jpeg_bytes(px, 12, 10, 3, 95));
        else
          test::write_file(fmt::format("{}/{:03d}.png", dir, i), test::png_bytes(px, 12, 10, PNG_FORMAT_RGB));
      }
}

// tools/make_shards.py; returns its output.
std::string make_shards(const std::string& folder, const std::string& out, const std::string& flags) {
  test::TempDir tmp;
  const std::string cmd = test::kPython + " " + test::kRoot + "/tools/make_shards.py " + folder + " " + out + " " +
                          flags + " >" + (tmp / "log") + " 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string log = test::read_file(tmp / "log");
  INFO(cmd << "\n" << log);
  REQUIRE(status == 0);
  return log;
}

// Runs a Python snippet with the venv's Python (tarfile fixtures).
void python_snippet(const std::string& code) {
  test::TempDir tmp;
  test::write_file(tmp / "s.py", code);
  const std::string cmd = test::kPython + " " + (tmp / "s.py") + " >" + (tmp / "log") + " 2>&1";
  const int status = std::system(cmd.c_str());
  INFO(code << "\n" << test::read_file(tmp / "log"));
  REQUIRE(status == 0);
}

test::RunResult run_ok(const std::string& args, const std::string& env = "") {
  auto r = test::run_gputrain(args, env);
  INFO(args << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

double final_test_loss(const std::string& run) {
  for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
    if (r["event"] == "summary") return r["final_test_loss"].get<double>();
  FAIL("no summary in " + run);
  return 0;
}

}  // namespace

TEST_CASE("webdataset: brace ranges, sets and globs name the shards in order, mistakes in one line", "[data]") {
  test::TempDir dir;
  for (const char* n : {"train-000008.tar", "train-000009.tar", "train-000010.tar", "val-a.tar", "val-b.tar"})
    test::write_file(dir / n, "");
  CHECK(expand_shards(dir / "train-{000008..000010}.tar") ==
        std::vector<std::string>{dir / "train-000008.tar", dir / "train-000009.tar", dir / "train-000010.tar"});
  CHECK(expand_shards(dir / "val-{b,a}.tar") == std::vector<std::string>{dir / "val-b.tar", dir / "val-a.tar"});
  CHECK(expand_shards(dir / "train-*.tar").size() == 3);
  CHECK(expand_shards(dir / "{train,val}-*.tar").size() == 5);
  CHECK_THAT(error_of([&] { expand_shards(dir / "train-{000008..000011}.tar"); }),
             Catch::Contains("train-000011.tar' (from '") && Catch::Contains("not found"));
  CHECK_THAT(error_of([&] { expand_shards(dir / "test-*.tar"); }), Catch::Contains("matches no file"));
  CHECK_THAT(error_of([&] { expand_shards(dir / "train-{9..1}.tar"); }), Catch::Contains("is not a range"));
  CHECK_THAT(error_of([&] { expand_shards(dir / "train-{1..2.tar"); }), Catch::Contains("without its '}'"));
}

TEST_CASE("webdataset: the tar index reads ustar, GNU and pax archives, and names where a shard is cut",
          "[data][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  python_snippet(fmt::format(R"(
import io, tarfile
long = "d/" + "x" * 150 + ".jpg"
for name, fmt in (("ustar", tarfile.USTAR_FORMAT), ("gnu", tarfile.GNU_FORMAT), ("pax", tarfile.PAX_FORMAT)):
    with tarfile.open("{0}/" + name + ".tar", "w", format=fmt) as t:
        for n, data in (("a/1.jpg", b"12345"), ("a/1.cls", b"7"), (long if fmt != tarfile.USTAR_FORMAT else "b.png", b"z" * 700)):
            i = tarfile.TarInfo(n); i.size = len(data); t.addfile(i, io.BytesIO(data))
        d = tarfile.TarInfo("dir"); d.type = tarfile.DIRTYPE; t.addfile(d)
with tarfile.open("{0}/hugepax.tar", "w", format=tarfile.PAX_FORMAT) as t:
    i = tarfile.TarInfo("a.jpg"); i.size = 3; i.pax_headers = {{"comment": "x" * 2_000_000}}
    t.addfile(i, io.BytesIO(b"abc"))
data = open("{0}/ustar.tar", "rb").read()
open("{0}/cut.tar", "wb").write(data[:2048 + 512 + 200])  # inside b.png's data
open("{0}/cut_header.tar", "wb").write(data[:2048 + 100])  # inside b.png's header
open("{0}/cut_between.tar", "wb").write(data[:2048])  # between two members: no end blocks
)", dir.path.string()));
  for (const char* name : {"ustar", "gnu", "pax"}) {
    INFO(name);
    const TarIndex t = index_tar(dir / (std::string(name) + ".tar"));
    CHECK(t.damage.empty());
    REQUIRE(t.members.size() == 3);
    CHECK(t.members[0].name == "a/1.jpg");
    CHECK(t.members[0].size == 5);
    CHECK(t.members[1].name == "a/1.cls");
    CHECK(t.members[2].size == 700);
    CHECK(t.members[2].name == (std::string(name) == "ustar" ? "b.png" : "d/" + std::string(150, 'x') + ".jpg"));
    CHECK(test::read_file(dir / (std::string(name) + ".tar")).substr(t.members[1].offset, 1) == "7");
  }
  CHECK_THAT(index_tar(dir / "hugepax.tar").damage, Catch::Contains("-byte extended header"));
  const TarIndex cut = index_tar(dir / "cut.tar");
  CHECK(cut.members.size() == 2);
  CHECK_THAT(cut.damage, Catch::Contains("truncated tar: member 'b.png' needs 700 bytes at offset 2560"));
  CHECK_THAT(index_tar(dir / "cut_header.tar").damage,
             Catch::Contains("truncated tar: the header after member 'a/1.cls' is cut at offset 2048"));
  const TarIndex between = index_tar(dir / "cut_between.tar");
  CHECK(between.members.size() == 2);
  CHECK_THAT(between.damage, Catch::Contains("truncated tar: the file ends at offset 2048, after member 'a/1.cls', "
                                             "without tar's end-of-archive blocks"));
}

TEST_CASE("webdataset: the stream order reads each shard in turn, within the shuffle buffer of its head",
          "[data][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  write_folder(dir / "images", 40);
  make_shards(dir / "images/train", dir / "shards/train", "--samples_per_shard 17");
  WebDatasetOptions o;
  o.height = o.width = 8;
  o.shuffle_buffer = 10;
  const WebDataset data(expand_shards(dir / "shards/train-*.tar"), o);
  REQUIRE(data.size() == 120);
  REQUIRE(data.shards().size() == 8);
  const auto plain = data.stream_order(1, 0, false);
  for (size_t i = 0; i < plain.size(); ++i) CHECK(plain[i] == static_cast<int64_t>(i));
  const auto a = data.stream_order(1, 0, true), again = data.stream_order(1, 0, true), next = data.stream_order(1, 1, true);
  CHECK(a == again);
  CHECK(a != next);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == plain);
  // The stream position of each sample: shards in the epoch's order. The k-th sample out entered
  // the buffer at most shuffle_buffer samples before: reads stay near the stream's head.
  std::vector<int64_t> shard_of(120), position(120);
  for (int64_t i = 0; i < 120; ++i) shard_of[static_cast<size_t>(i)] = std::min<int64_t>(i / 17, 7);
  std::vector<int64_t> shard_order;
  for (int64_t s : a)
    if (std::find(shard_order.begin(), shard_order.end(), shard_of[static_cast<size_t>(s)]) == shard_order.end())
      shard_order.push_back(shard_of[static_cast<size_t>(s)]);
  int64_t p = 0;
  for (int64_t s : shard_order)
    for (int64_t i = s * 17; i < std::min<int64_t>((s + 1) * 17, 120); ++i) position[static_cast<size_t>(i)] = p++;
  for (size_t k = 0; k + 10 < a.size(); ++k) CHECK(position[static_cast<size_t>(a[k])] < static_cast<int64_t>(k) + 10);
}

TEST_CASE("webdataset: shards train as the same images in a folder, and resume exactly on 2 ranks",
          "[data][cli][dist][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  write_folder(dir / "images", 48);
  make_shards(dir / "images/train", dir / "shards/train", "--no-shuffle --samples_per_shard 20");
  make_shards(dir / "images/val", dir / "shards/val", "--no-shuffle --samples_per_shard 20");
  const std::string common =
      "train --image_size 12x10 --model cnn --width 4 --batch_size 16 --epochs 2 --optimizer sgd --lr 0.05 "
      "--num_workers 2 --threads 1 --device cpu --no-use_amp --no-shuffle ";
  const std::string shards = "--dataset webdataset --data_dir '" + (dir / "shards/train-{000000..000007}.tar") +
                             "' --test_file '" + (dir / "shards/val-*.tar") + "' ";
  run_ok(common + "--dataset image_folder --data_dir " + (dir / "images") + " --output_dir " + (dir / "folder"));
  auto r = run_ok(common + shards + "--output_dir " + (dir / "shards_run"));
  CHECK_THAT(r.out, Catch::Contains("(8 shards)"));
  CHECK(final_test_loss(dir / "shards_run") == final_test_loss(dir / "folder"));

  // Shuffled, RandomResizedCrop, 2 ranks: stopped after step 5 (inside epoch 1 of 4 steps of a
  // global batch of 32), resumed, ends on the uninterrupted run's weights.
  const std::string two = "launch --nproc_per_node 2 -- " + common + shards +
                          "--shuffle --shuffle_buffer 30 --random_resized_crop --hflip --batch_size 16 --epochs 3 ";
  run_ok(two + "--output_dir " + (dir / "whole") + " --export " + (dir / "whole.st"));
  auto stopped = test::run_gputrain(two + "--output_dir " + (dir / "split"), "GPUTRAIN_FAULT_SIGTERM_STEP=5");
  INFO(stopped.out << stopped.err);
  REQUIRE(stopped.exit_code == 143);
  run_ok(two + "--resume auto --output_dir " + (dir / "split") + " --export " + (dir / "split.st"));
  test::check_same_weights(dir / "whole.st", dir / "split.st");
}

TEST_CASE("webdataset: a cut shard and a sample without its label are exit 2 naming shard and member",
          "[data][cli][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  write_folder(dir / "images", 12);
  make_shards(dir / "images/train", dir / "shards/train", "--samples_per_shard 12");
  python_snippet(fmt::format(R"(
import io, tarfile
src = "{0}/shards/train-000001.tar"
with tarfile.open(src) as t, tarfile.open("{0}/shards/nolabel-000001.tar", "w") as out:
    for m in t.getmembers():
        if m.name != "000000015.cls":
            out.addfile(m, t.extractfile(m))
with tarfile.open(src) as t, tarfile.open("{0}/shards/hugelabel-000001.tar", "w") as out:
    for m in t.getmembers():
        data = t.extractfile(m).read()
        if m.name == "000000015.cls":
            data = b"1000000000000"
            m.size = len(data)
        out.addfile(m, io.BytesIO(data))
data = open(src, "rb").read()
open("{0}/shards/cut-000001.tar", "wb").write(data[:len(data) // 2])
)", dir.path.string()));
  const std::string base = "train --dataset webdataset --image_size 8 --model cnn --width 4 --batch_size 4 --epochs 1 "
                           "--device cpu --data_dir '" + (dir / "shards/");
  for (const auto& [shard, expected] : std::vector<std::pair<std::string, std::string>>{
           {"nolabel", "nolabel-000001.tar: sample '000000015' has no .cls label (its members: 000000015."},
           {"cut", "cut-000001.tar: truncated tar: member '"},
           {"hugelabel", "hugelabel-000001.tar: member '000000015.cls' holds '1000000000000', not a class index"}}) {
    auto r = test::run_gputrain(base + "{train-000000," + shard + "-000001}.tar'");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(expected) && Catch::Contains("--skip_bad_samples"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') <= 2);  // the error and its hint
    auto skipped = test::run_gputrain(base + "{train-000000," + shard + "-000001}.tar' --skip_bad_samples --output_dir " +
                                      (dir / ("skip_" + shard)));
    INFO(skipped.out << skipped.err);
    CHECK(skipped.exit_code == 0);
    CHECK_THAT(skipped.out, Catch::Contains("bad samples skipped"));
  }
}

TEST_CASE("webdataset: labels get every format's class checks, and cuts, compressed or text shards and twin members "
          "are named",
          "[data][cli][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  write_folder(dir / "images", 12);  // 36 training images of classes 0, 1, 2
  make_shards(dir / "images/train", dir / "shards/train", "--samples_per_shard 36");
  // Copies of the one shard, each with one thing wrong.
  python_snippet(fmt::format(R"(
import gzip, io, tarfile
root = "{0}/shards/"
src = root + "train-000000.tar"
def rewrite(name, change):
    with tarfile.open(src) as t, tarfile.open(root + name, "w") as out:
        for m in t.getmembers():
            data = t.extractfile(m).read()
            for m2, d2 in change(m, data):
                m2.size = len(d2)
                out.addfile(m2, io.BytesIO(d2))
def relabel(f):
    return lambda m, d: [(m, f(m.name, d) if m.name.endswith(".cls") else d)]
rewrite("gap.tar", relabel(lambda n, d: b"0" if d == b"1" else d))        # labels 0 and 2
rewrite("ones.tar", relabel(lambda n, d: b"1"))                           # label 1 alone
rewrite("neg.tar", relabel(lambda n, d: b"-1" if n == "000000007.cls" else d))
rewrite("five.tar", relabel(lambda n, d: b"5" if n == "000000007.cls" else d))
rewrite("twin.tar", lambda m, d: [(m, d), (tarfile.TarInfo(m.name), d)] if m.name == "000000007.cls" else [(m, d)])
data = open(src, "rb").read()
with tarfile.open(src) as t:
    cls = [m for m in t.getmembers() if m.name == "000000007.cls"][0]
open(root + "cutcls.tar", "wb").write(data[:cls.offset_data])  # the label's header, not its byte
open(root + "gz.tar", "wb").write(gzip.compress(data))
open(root + "gz.tar.gz", "wb").write(gzip.compress(data))
open(root + "text.tar", "wb").write(b"hello, this is not a tar file\n" * 40)
)", dir.path.string()));
  const std::string base = "train --dataset webdataset --image_size 8 --model cnn --width 4 --batch_size 4 --epochs 1 "
                           "--device cpu --data_dir ";
  struct Case {
    std::string shard, message;
    bool skippable;  // a bad sample (dropped and counted with --skip_bad_samples) or the data's own fault
  };
  for (const auto& c : std::vector<Case>{
           {"gap.tar", "gap.tar': labels run 0..2 but 1 of these 3 classes have no sample (first: 1)", false},
           {"ones.tar", "labels run 0..1 but 1 of these 2 classes have no sample (first: 0)", false},
           {"neg.tar", "neg.tar: sample '000000007': label -1 is negative", false},
           {"twin.tar", "twin.tar: sample '000000007' has two '.cls' members in a row", true},
           {"cutcls.tar", "cutcls.tar: truncated tar: member '000000007.cls' needs", true},
           {"gz.tar", "gz.tar': it is compressed (gzip)", false},
           {"gz.tar.gz", "gz.tar.gz': it is compressed (gzip)", false},
           {"text.tar", "text.tar': it is not a tar file (it starts 'hello, this is n', no tar header)", false}}) {
    DYNAMIC_SECTION(c.shard) {
      auto r = test::run_gputrain(base + (dir / ("shards/" + c.shard)) + " --output_dir " + (dir / "run"));
      INFO(r.out << r.err);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.err, Catch::Contains(c.message));
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') <= 2);  // the error and its hint
      auto skipped = test::run_gputrain(base + (dir / ("shards/" + c.shard)) + " --skip_bad_samples --output_dir " +
                                        (dir / "skip"));
      INFO(skipped.out << skipped.err);
      CHECK(skipped.exit_code == (c.skippable ? 0 : 2));
      if (c.skippable) {
        // One sample lost, counted once (the held-out split reads the same shard).
        std::ifstream in(dir / "skip/metrics.jsonl");
        nlohmann::json summary;
        for (std::string line; std::getline(in, line);)
          if (auto rec = nlohmann::json::parse(line); rec["event"] == "summary") summary = rec;
        CHECK(summary["bad_samples"] == 1);
      }
    }
  }
  // --num_classes: a label beyond it names its sample.
  auto five = test::run_gputrain(base + (dir / "shards/five.tar") + " --num_classes 3 --output_dir " + (dir / "five"));
  CHECK(five.exit_code == 2);
  CHECK_THAT(five.err, Catch::Contains("five.tar: sample '000000007': label 5 is outside 0..2 (3 classes)"));
}

TEST_CASE("imagenet_like: the preset trains from an image folder and from its shards, tiny", "[data][cli][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  write_folder(dir / "images", 12);
  make_shards(dir / "images/train", dir / "shards/train", "--samples_per_shard 10");
  make_shards(dir / "images/val", dir / "shards/val", "--samples_per_shard 10");
  // The preset's recipe at toy sizes: 16-pixel crops, width 4, two epochs of batch 6.
  const std::string tiny = "train --preset imagenet_like --image_size 16 --width 4 --batch_size 6 --epochs 2 "
                           "--warmup_steps 2 --device cpu ";
  auto folder = run_ok(tiny + "--data_dir " + (dir / "images") + " --output_dir " + (dir / "folder"));
  CHECK_THAT(folder.out, Catch::Contains("image folder"));
  auto shards = run_ok(tiny + "--dataset webdataset --data_dir '" + (dir / "shards/train-*.tar") + "' --test_file '" +
                       (dir / "shards/val-*.tar") + "' --output_dir " + (dir / "shards_run"));
  CHECK_THAT(shards.out, Catch::Contains("webdataset"));
  const std::string config = test::read_file(dir / "shards_run/config.json");
  CHECK_THAT(config, Catch::Contains("\"aa\": \"trivialaugmentwide\"") &&
                         Catch::Contains("\"random_resized_crop\": true") && Catch::Contains("\"crop_pct\": 0.875"));
}
