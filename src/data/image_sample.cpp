// One image sample from its bytes, and views of an ImageSource.
#include "data/image_sample.h"

#include "core/error.h"
#include "data/decode_box.h"
#include "data/resample.h"

namespace gputrain {

void decode_sample(const uint8_t* data, size_t size, const std::string& name, const ImageSampleOptions& o,
                   uint64_t seed, float* out) {
  if (o.random_resized_crop) {
    // The box comes from the header alone, so the decoder can skip what lies outside it.
    int64_t h = 0, w = 0;
    std::string why;
    if (!read_image_header(data, size, &h, &w, &why, o.max_pixels))
      throw usage_error(name + ": " + (why == "header not within the bytes read" ? "truncated image header" : why));
    Rng rng(mix_seed(seed, 0x52c));
    const CropBox box = random_resized_crop_box(h, w, *o.random_resized_crop, rng);
    Window win;
    const Image img = decode_image_box(data, size, o.channels, name, o.max_pixels, box, o.height, o.width,
                                       o.reduced_decode, &win);
    resample(img, win, o.height, o.width, out, o.mean, o.std);
    return;
  }
  const Image img = decode_image(data, size, o.channels, name, o.max_pixels);
  if (o.crop_pct > 0)
    resize_center_crop(img, o.height, o.width, o.crop_pct, out);
  else
    resize_to_chw_float(img, o.height, o.width, out);
  if (o.mean.empty()) return;
  const int64_t plane = o.height * o.width;
  for (int64_t c = 0; c < o.channels; ++c) {
    const size_t i = o.mean.size() == 1 ? 0 : static_cast<size_t>(c);
    const float m = o.mean[i], inv = 1.0f / o.std[i];
    for (float* p = out + c * plane; p < out + (c + 1) * plane; ++p) *p = (*p - m) * inv;
  }
}

namespace {

class ImageView : public DatasetWrapper {
 public:
  ImageView(std::shared_ptr<const ImageSource> source, ImageSampleOptions view)
      : DatasetWrapper(source), source_(std::move(source)), view_(std::move(view)) {}
  int64_t get(int64_t index, float* x, float*, uint64_t seed) const override {
    return source_->load(index, x, seed, view_);
  }

 private:
  std::shared_ptr<const ImageSource> source_;
  ImageSampleOptions view_;
};

}  // namespace

DatasetPtr ImageSource::view(const ImageSampleOptions& view) const {
  return std::make_shared<ImageView>(shared_from_this(), view);
}

}  // namespace gputrain
