// Builds the train and test datasets a Config asks for, with their transforms.
#include "data/make_dataset.h"

#include "data/idx_dataset.h"
#include "data/synthetic.h"
#include "data/transforms.h"

namespace gputrain {
namespace {

// Per-channel statistics of the training sets, so inputs reach the model centred.
struct Stats {
  std::vector<float> mean, std;
};
Stats known_stats(const std::string& dataset) {
  if (dataset == "fashion-mnist") return {{0.2860f}, {0.3530f}};
  if (dataset == "mnist") return {{0.1307f}, {0.3081f}};
  return {{0.5f}, {0.2f}};  // synthetic: 0.6 * U + 0.4 * U has mean 0.5, std ~0.2
}

}  // namespace

std::string dataset_dir(const Config& c) {
  return c.data_dir.empty() ? "/usr/share/datasets/" + c.dataset : c.data_dir;
}

DataSplits make_datasets(const Config& c) {
  DataSplits s;
  DatasetPtr train, test;
  if (c.dataset == "synthetic") {
    auto shape = parse_shape(c.input_shape);
    train = std::make_shared<SyntheticDataset>(c.synthetic_train_size, shape, c.num_classes, c.seed);
    // The test split shares the class patterns (same seed) but its samples come after the train's.
    test = std::make_shared<SyntheticDataset>(c.synthetic_test_size, shape, c.num_classes, c.seed,
                                              c.synthetic_train_size);
    s.description = "synthetic " + c.input_shape + ", " + std::to_string(c.num_classes) + " classes";
  } else {
    std::string dir = dataset_dir(c);
    train = load_idx_split(dir, "train", c.dataset);
    test = load_idx_split(dir, "t10k", c.dataset);
    s.description = c.dataset + " from " + dir;
  }
  s.description += " (" + std::to_string(train->size()) + " train, " + std::to_string(test->size()) + " test)";

  std::vector<std::shared_ptr<const Transform>> train_t, test_t;
  if (c.random_crop > 0) train_t.push_back(std::make_shared<RandomCrop>(c.random_crop));
  if (c.hflip) train_t.push_back(std::make_shared<HorizontalFlip>());
  if (c.normalize) {
    auto st = known_stats(c.dataset);
    auto norm = std::make_shared<Normalize>(st.mean, st.std);
    train_t.push_back(norm);
    test_t.push_back(norm);
  }
  s.train = train_t.empty() ? train : std::make_shared<TransformedDataset>(train, train_t);
  s.test = test_t.empty() ? test : std::make_shared<TransformedDataset>(test, test_t);
  return s;
}

}  // namespace gputrain
