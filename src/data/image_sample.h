// How encoded image bytes become one training or evaluation sample, shared by the image folder
// and the shards: the whole picture resized, the evaluation center crop, or RandomResizedCrop
// decoded only where the crop lies. And the base of datasets made of such images, with views.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/crop_box.h"
#include "data/dataset.h"
#include "data/image_decode.h"

namespace gputrain {

struct ImageSampleOptions {
  int64_t height = 224, width = 224;  // every image is resized to this
  int channels = 3;                   // 3 = RGB, 1 = gray
  // --max_image_pixels: larger images are refused from their header (see image_decode.h).
  int64_t max_pixels = kDefaultMaxImagePixels;
  // > 0: an evaluation view instead: the short side resized to min(height, width) / crop_pct
  // (the aspect kept), then the center height x width cut out, as timm and torchvision evaluate.
  double crop_pct = 0;
  // Set: the training view instead: a RandomResizedCrop box per sample, drawn from the sample's
  // seed, resized (antialiased) to height x width.
  std::optional<RrcRange> random_resized_crop;
  // With a crop: JPEGs decoded at a reduced DCT scale and only in the crop's region
  // (decode_box.h); false decodes them whole, for torchvision's pixels.
  bool reduced_decode = true;
  // Set (one value, or one per channel): the sample is normalized, (v - mean) / std, as it is
  // written, instead of by a pass of its own (make_datasets decides when nothing comes between).
  std::vector<float> mean, std;
};

// Decodes `data` into `out` (CHW floats in [0, 1], or normalized) as `o` says; `seed` draws the crop. Throws
// usage_error("<name>: <reason>") for a file that does not decode.
void decode_sample(const uint8_t* data, size_t size, const std::string& name, const ImageSampleOptions& o,
                   uint64_t seed, float* out);

// A dataset of encoded images that can be decoded more than one way: the training view crops,
// the evaluation view of the same samples (a held-out part) does not.
class ImageSource : public Dataset, public std::enable_shared_from_this<ImageSource> {
 public:
  // Sample `index` decoded as `view` says (its crop_pct, random_resized_crop and
  // reduced_decode), seeded by `seed`; its label.
  virtual int64_t load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& view) const = 0;
  // The same samples decoded as `view` says; bad samples are still tracked by this dataset.
  DatasetPtr view(const ImageSampleOptions& view) const;
};

}  // namespace gputrain
