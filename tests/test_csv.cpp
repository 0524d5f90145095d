// CSV reading and CSV datasets (tabular and sliding windows), good and broken, on generated fixtures.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "data/csv_dataset.h"
#include "test_errors.h"
#include "test_util.h"

using namespace gputrain;
using test::error_of;

namespace {

std::string read_error(const std::string& path) {
  return error_of(path, [&] { read_csv(path); });
}

std::string load_error(const std::string& path, const CsvOptions& o,
                       const std::vector<std::string>* classes = nullptr) {
  return error_of(path, [&] { load_csv_dataset(path, o, classes); });
}

CsvOptions targets(std::vector<std::string> t) {
  CsvOptions o;
  o.targets = std::move(t);
  return o;
}

std::vector<float> sample(const Dataset& d, int64_t i, int64_t* label = nullptr, std::vector<float>* target = nullptr) {
  std::vector<float> x(static_cast<size_t>(d.sample_numel()));
  std::vector<float> t(static_cast<size_t>(std::max<int64_t>(1, d.target_numel())));
  int64_t l = d.get(i, x.data(), t.data(), 0);
  if (label) *label = l;
  if (target) *target = std::vector<float>(t.begin(), t.begin() + d.target_numel());
  return x;
}

// A series of 10 rows: t = 0..9, a = t, b = 10 * t, y = 100 + t.
std::string series() {
  std::string s = "t,a,b,y\n";
  for (int t = 0; t < 10; ++t)
    s += std::to_string(t) + "," + std::to_string(t) + "," + std::to_string(10 * t) + "," + std::to_string(100 + t) +
         "\n";
  return s;
}

}  // namespace

TEST_CASE("CSV reader: quotes, CRLF, BOM, separators, trailing newline", "[csv]") {
  test::TempDir dir;
  test::write_file(dir / "q.csv",
                   "\xEF\xBB\xBFname,note,x\r\n"
                   "\"Smith, J\",\"said \"\"hi\"\"\",1\r\n"
                   "plain, spaced ,2\r\n"
                   "\"multi\nline\",\"\",3");  // no trailing newline
  CsvTable t = read_csv(dir / "q.csv");
  CHECK(t.columns == std::vector<std::string>{"name", "note", "x"});
  REQUIRE(t.rows() == 3);
  CHECK(t.cell(0, 0) == "Smith, J");
  CHECK(t.cell(0, 1) == "said \"hi\"");
  CHECK(t.cell(1, 1) == "spaced");
  CHECK(t.cell(2, 0) == "multi\nline");
  CHECK(t.cell(2, 1) == "");
  CHECK(t.lines == std::vector<int64_t>{2, 3, 4});

  test::write_file(dir / "semi.csv", "a;b\n1,5;2\n\n");
  CsvTable s = read_csv(dir / "semi.csv");
  CHECK(s.separator == ';');
  CHECK(s.cell(0, 0) == "1,5");
  CHECK(s.rows() == 1);
  test::write_file(dir / "tab.tsv", "a\tb\n1\t2\n");
  CHECK(read_csv(dir / "tab.tsv").cell(0, 1) == "2");
}

TEST_CASE("CSV reader: broken files give one clear error each", "[csv]") {
  test::TempDir dir;
  CHECK_THAT(read_error(dir / "missing.csv"), Catch::Contains("cannot open"));
  test::write_file(dir / "empty.csv", "");
  CHECK_THAT(read_error(dir / "empty.csv"), Catch::Contains("is empty"));
  test::write_file(dir / "blank.csv", "\n\r\n  \n");
  CHECK_THAT(read_error(dir / "blank.csv"), Catch::Contains("is empty"));
  test::write_file(dir / "header.csv", "a,b,label\n");
  CHECK_THAT(read_error(dir / "header.csv"), Catch::Contains("no data rows"));
  test::write_file(dir / "ragged.csv", "a,b,label\n1,2,x\n3,4\n");
  CHECK_THAT(read_error(dir / "ragged.csv"), Catch::Contains("line 3 has 2 fields, the header has 3"));
  test::write_file(dir / "long.csv", "a,b\r\n1,2\r\n3,4,5\r\n");
  CHECK_THAT(read_error(dir / "long.csv"), Catch::Contains("line 3 has 3 fields"));
  test::write_file(dir / "quote.csv", "a,b\n1,2\n\"3,4\n5,6\n");
  auto q = read_error(dir / "quote.csv");
  CHECK_THAT(q, Catch::Contains("line 3") && Catch::Contains("unterminated quote"));
  test::write_file(dir / "after.csv", "a,b\n\"1\"x,2\n");
  CHECK_THAT(read_error(dir / "after.csv"), Catch::Contains("line 2: unexpected 'x' after a closing quote"));
  test::write_file(dir / "dup.csv", "a,b,a\n1,2,3\n");
  CHECK_THAT(read_error(dir / "dup.csv"), Catch::Contains("'a' appears twice"));
  test::write_file(dir / "unnamed.csv", ",a,b\n0,1,2\n");
  CHECK_THAT(read_error(dir / "unnamed.csv"), Catch::Contains("column 1 of the header has no name"));
  CHECK_THAT(read_error(dir.path.string()), Catch::Contains("is a directory"));
}

TEST_CASE("CSV dataset: tabular classification with string and integer labels", "[csv]") {
  test::TempDir dir;
  test::write_file(dir / "s.csv", "x1,x2,species\n1,2,setosa\n3,4.5,virginica\n-5,6e1,setosa\n7,+8,versicolor\n");
  auto d = load_csv_dataset(dir / "s.csv", targets({"species"}));
  CHECK(d->task() == "classification");
  CHECK(d->size() == 4);
  CHECK(d->sample_shape() == std::vector<int64_t>{2});
  CHECK(d->num_classes() == 3);
  CHECK(d->class_names() == std::vector<std::string>{"setosa", "versicolor", "virginica"});
  CHECK(d->feature_names() == std::vector<std::string>{"x1", "x2"});
  int64_t label = -1;
  CHECK(sample(*d, 1, &label) == std::vector<float>{3, 4.5f});
  CHECK(label == 2);
  CHECK(sample(*d, 2, &label) == std::vector<float>{-5, 60});
  CHECK(label == 0);
  CHECK(sample(*d, 3, &label) == std::vector<float>{7, 8});
  CHECK(label == 1);

  // Integer labels sort as numbers: 2 < 10, not "10" < "2".
  test::write_file(dir / "i.csv", "label,x\n10,1\n2,2\n-1,3\n2,4\n");
  auto n = load_csv_dataset(dir / "i.csv", targets({"label"}));
  CHECK(n->task() == "classification");
  CHECK(n->class_names() == std::vector<std::string>{"-1", "2", "10"});
  sample(*n, 0, &label);
  CHECK(label == 2);
  sample(*n, 2, &label);
  CHECK(label == 0);
}

TEST_CASE("CSV dataset: regression, feature subsets and auto detection", "[csv]") {
  test::TempDir dir;
  test::write_file(dir / "r.csv", "a,b,c,yaw,pitch\n1,2,3,0.5,1\n4,5,6,-1,2\n");
  CsvOptions o = targets({"yaw", "pitch"});
  auto d = load_csv_dataset(dir / "r.csv", o);
  CHECK(d->task() == "regression");
  CHECK(d->num_classes() == 0);
  CHECK(d->is_regression());
  CHECK(d->target_shape() == std::vector<int64_t>{2});
  CHECK(d->class_names().empty());
  std::vector<float> t;
  CHECK(sample(*d, 1, nullptr, &t) == std::vector<float>{4, 5, 6});
  CHECK(t == std::vector<float>{-1, 2});

  o.features = {"c", "a"};
  auto sub = load_csv_dataset(dir / "r.csv", o);
  CHECK(sub->sample_shape() == std::vector<int64_t>{2});
  CHECK(sub->feature_names() == std::vector<std::string>{"c", "a"});
  CHECK(sample(*sub, 1) == std::vector<float>{6, 4});

  // Auto: one fractional value makes a single column regression; integers make it labels.
  test::write_file(dir / "f.csv", "x,y\n1,1\n2,2.5\n3,3\n");
  CHECK(load_csv_dataset(dir / "f.csv", targets({"y"}))->task() == "regression");
  test::write_file(dir / "n.csv", "x,y\n1,1\n2,2\n3,3\n");
  CHECK(load_csv_dataset(dir / "n.csv", targets({"y"}))->task() == "classification");
  CsvOptions forced = targets({"y"});
  forced.task = "regression";
  auto r = load_csv_dataset(dir / "n.csv", forced);
  CHECK(r->task() == "regression");
  CHECK(r->target_shape() == std::vector<int64_t>{1});
  forced.task = "classification";
  CHECK(load_csv_dataset(dir / "f.csv", forced)->num_classes() == 3);
}

TEST_CASE("CSV dataset: a test split uses the training split's classes", "[csv]") {
  test::TempDir dir;
  test::write_file(dir / "train.csv", "x,label\n1,cat\n2,dog\n3,emu\n");
  test::write_file(dir / "test.csv", "x,label\n4,emu\n5,cat\n");
  auto train = load_csv_dataset(dir / "train.csv", targets({"label"}));
  auto test = load_csv_dataset(dir / "test.csv", targets({"label"}), &train->class_names());
  CHECK(test->num_classes() == 3);
  CHECK(test->class_names() == train->class_names());
  int64_t label = -1;
  sample(*test, 0, &label);
  CHECK(label == 2);

  test::write_file(dir / "unseen.csv", "x,label\n4,emu\n5,fox\n");
  auto msg = load_error(dir / "unseen.csv", targets({"label"}), &train->class_names());
  CHECK_THAT(msg, Catch::Contains("line 3") && Catch::Contains("'fox'") && Catch::Contains("not one of the 3 classes"));
}

TEST_CASE("CSV dataset: sliding windows over a series", "[csv]") {
  test::TempDir dir;
  test::write_file(dir / "s.csv", series());
  CsvOptions o = targets({"y"});
  o.features = {"a", "b"};
  o.task = "regression";
  o.window = 3;
  auto d = load_csv_dataset(dir / "s.csv", o);
  CHECK(d->sample_shape() == std::vector<int64_t>{3, 2});
  CHECK(d->size() == 7);  // (10 - 3 - 1) / 1 + 1
  std::vector<float> t;
  // Sample 2 covers rows 2..4 and predicts row 5.
  CHECK(sample(*d, 2, nullptr, &t) == std::vector<float>{2, 20, 3, 30, 4, 40});
  CHECK(t == std::vector<float>{105});
  sample(*d, 6, nullptr, &t);
  CHECK(t == std::vector<float>{109});

  struct Case {
    int64_t window, stride, horizon, size, k, first_row, target_row;
  };
  for (Case c : {Case{3, 2, 1, 4, 1, 2, 5}, Case{4, 3, 0, 3, 2, 6, 9}, Case{2, 1, 3, 6, 5, 5, 9},
                 Case{10, 1, 0, 1, 0, 0, 9}, Case{5, 4, 2, 1, 0, 0, 6}, Case{1, 5, 1, 2, 1, 5, 6}}) {
    INFO("window " << c.window << " stride " << c.stride << " horizon " << c.horizon);
    o.window = c.window;
    o.stride = c.stride;
    o.horizon = c.horizon;
    auto w = load_csv_dataset(dir / "s.csv", o);
    CHECK(w->size() == c.size);
    auto x = sample(*w, c.k, nullptr, &t);
    CHECK(x.front() == static_cast<float>(c.first_row));
    CHECK(x[x.size() - 2] == static_cast<float>(c.first_row + c.window - 1));
    CHECK(t == std::vector<float>{static_cast<float>(100 + c.target_row)});
  }

  // Forecasting from the target's own past is allowed in windows.
  o = targets({"y"});
  o.features = {"y"};
  o.window = 2;
  o.task = "regression";
  auto ar = load_csv_dataset(dir / "s.csv", o);
  CHECK(sample(*ar, 0, nullptr, &t) == std::vector<float>{100, 101});
  CHECK(t == std::vector<float>{102});

  // Windows of classification: the label of the target row.
  o = targets({"t"});
  o.window = 4;
  auto cls = load_csv_dataset(dir / "s.csv", o);
  CHECK(cls->task() == "classification");
  int64_t label = -1;
  sample(*cls, 0, &label);
  CHECK(cls->class_names()[static_cast<size_t>(label)] == "4");

  o.window = 10;  // 10 rows + horizon 1 > 10
  CHECK_THAT(load_error(dir / "s.csv", o),
             Catch::Contains("a window of 10 rows plus a horizon of 1") && Catch::Contains("file's 10"));
  o.window = 20;
  o.horizon = 0;
  CHECK_THAT(load_error(dir / "s.csv", o), Catch::Contains("window of 20"));
  o.window = 2;
  o.stride = 0;
  CHECK_THAT(load_error(dir / "s.csv", o), Catch::Contains("stride must be 1 or more"));
}

TEST_CASE("CSV dataset: bad columns, cells and options give clear errors", "[csv]") {
  test::TempDir dir;
  std::string p = dir / "d.csv";
  test::write_file(p, "x1,x2,label\n1,2,a\n3,4,b\n");
  auto missing = load_error(p, targets({"lable"}));
  CHECK_THAT(missing, Catch::Contains("no target column 'lable'") && Catch::Contains("did you mean 'label'"));
  CsvOptions o = targets({"label"});
  o.features = {"x3"};
  CHECK_THAT(load_error(p, o), Catch::Contains("no feature column 'x3'"));
  o.features = {"x1", "label"};
  CHECK_THAT(load_error(p, o), Catch::Contains("both a feature and a target"));
  CHECK_THAT(load_error(p, CsvOptions{}), Catch::Contains("no target column given"));
  o = targets({"x1", "label"});
  o.task = "classification";
  CHECK_THAT(load_error(p, o), Catch::Contains("exactly one target column"));
  o.task = "clasification";
  CHECK_THAT(load_error(p, o), Catch::Contains("unknown task"));
  o = targets({"x1"});
  o.task = "regression";
  CHECK_THAT(load_error(p, o),
             Catch::Contains("line 2, column 'label'") && Catch::Contains("'a' is not a finite number"));

  test::write_file(dir / "text.csv", "x1,x2,label\n1,2,a\n3,abc,b\n");
  CHECK_THAT(load_error(dir / "text.csv", targets({"label"})),
             Catch::Contains("line 3, column 'x2': 'abc' is not a finite number"));
  test::write_file(dir / "hole.csv", "x1,x2,label\n1,,a\n3,4,b\n");
  CHECK_THAT(load_error(dir / "hole.csv", targets({"label"})),
             Catch::Contains("line 2, column 'x2': the cell is empty"));
  test::write_file(dir / "nan.csv", "x1,x2,label\n1,nan,a\n3,4,b\n");
  CHECK_THAT(load_error(dir / "nan.csv", targets({"label"})), Catch::Contains("'nan' is not a finite number"));
  test::write_file(dir / "big.csv", "x1,x2,label\n1,1e39,a\n3,4,b\n");
  CHECK_THAT(load_error(dir / "big.csv", targets({"label"})), Catch::Contains("'1e39'"));
  test::write_file(dir / "nolabel.csv", "x1,x2,label\n1,2,a\n3,4,\n");
  CHECK_THAT(load_error(dir / "nolabel.csv", targets({"label"})),
             Catch::Contains("line 3, column 'label': the label is empty"));
  test::write_file(dir / "only.csv", "label\na\n");
  CHECK_THAT(load_error(dir / "only.csv", targets({"label"})), Catch::Contains("no feature columns"));
}
