// The parsers of Config values (shapes, number lists, durations). Validating a whole Config
// needs the field table, which needs this struct: that is config/validate's.
#include "config/config.h"

#include <cmath>
#include <cstdlib>

namespace gputrain {

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  std::string cur;
  for (size_t i = 0; i <= text.size(); ++i) {
    char ch = i < text.size() ? text[i] : 'x';
    if (ch == 'x' || ch == ',') {
      if (cur.empty() || cur.size() > 9) return {};
      dims.push_back(std::stoll(cur));
      if (dims.back() < 1) return {};
      cur.clear();
    } else if (ch >= '0' && ch <= '9') {
      cur += ch;
    } else {
      return {};
    }
  }
  return dims;
}

std::vector<double> normalize_numbers(const std::string& text, bool mean) {
  if (text == "imagenet") return mean ? std::vector<double>{0.485, 0.456, 0.406} : std::vector<double>{0.229, 0.224, 0.225};
  return parse_numbers(text);
}

std::vector<double> parse_numbers(const std::string& text) {
  std::vector<double> out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    char* stop = nullptr;
    double x = std::strtod(item.c_str(), &stop);
    if (!item.empty() && stop != item.c_str() && *stop == '/') {  // a fraction: torchvision writes the ratio range as 3/4, 4/3
      const char* den = stop + 1;
      x /= std::strtod(den, &stop);
      if (stop == den) return {};
    }
    if (item.empty() || *stop != '\0' || !std::isfinite(x)) return {};
    out.push_back(x);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::vector<int64_t> parse_image_size(const std::string& text) {
  auto dims = parse_shape(text);
  if (dims.size() == 1) dims.push_back(dims[0]);
  if (dims.size() != 2 || dims[0] > 16384 || dims[1] > 16384) return {};
  return dims;
}

double parse_duration(const std::string& text) {
  if (text.empty()) return -1;
  double total = 0, number = 0;
  bool have_digits = false;
  for (char ch : text) {
    if (ch >= '0' && ch <= '9') {
      number = number * 10 + (ch - '0');
      have_digits = true;
    } else if ((ch == 'h' || ch == 'm' || ch == 's') && have_digits) {
      total += number * (ch == 'h' ? 3600 : ch == 'm' ? 60 : 1);
      number = 0;
      have_digits = false;
    } else {
      return -1;
    }
  }
  return total + number;  // trailing digits are seconds
}

bool encoded_images(const std::string& dataset) { return dataset == "image_folder" || dataset == "webdataset"; }

}  // namespace gputrain
