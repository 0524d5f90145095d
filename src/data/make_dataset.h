// Builds the train and test datasets a Config asks for, with their transforms.
#pragma once
#include <string>

#include "config/config.h"
#include "data/dataset.h"

namespace gputrain {

struct DataSplits {
  DatasetPtr train;  // with augmentation and normalization
  DatasetPtr test;   // with normalization only
  std::string description;
};

// Throws a usage error (with an install hint) when the data is missing or malformed.
DataSplits make_datasets(const Config& c);

// The folder a dataset is read from: --data_dir, or /usr/share/datasets/<name>.
std::string dataset_dir(const Config& c);

}  // namespace gputrain
