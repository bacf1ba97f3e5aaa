#include "serve/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

namespace tarn::serve {
namespace {

constexpr int kMaxOutputSide = 4096;

// 8-bit interleaved pixels as a decoder produced them: 1 component (grey), 3 (RGB) or
// 4 (RGBA, alpha not premultiplied).
struct DecodedImage {
  int width = 0;
  int height = 0;
  int components = 0;
  std::vector<uint8_t> pixels;
};

std::string FirstBytesHex(std::string_view bytes) {
  std::string hex;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 4); ++i) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%s%02x", i == 0 ? "" : " ",
                  static_cast<unsigned>(static_cast<uint8_t>(bytes[i])));
    hex += buf;
  }
  return hex;
}

Status CheckPixelCount(std::string_view format, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0) {
    return InvalidArgumentError("image: " + std::string(format) + " has no pixels (" +
                                std::to_string(width) + " x " + std::to_string(height) + ")");
  }
  if (width * height > kMaxImagePixels) {
    return InvalidArgumentError("image: " + std::string(format) + " is " + std::to_string(width) +
                                " x " + std::to_string(height) + " pixels, more than the " +
                                std::to_string(kMaxImagePixels) + " allowed");
  }
  return OkStatus();
}

// Owns a png_image for the simplified API. libpng frees the image's internals itself when a
// call fails; png_image_free is a no-op on an image already freed, so the destructor may
// always call it.
class PngImage {
 public:
  PngImage() {
    std::memset(&image_, 0, sizeof image_);
    image_.version = PNG_IMAGE_VERSION;
  }
  ~PngImage() { png_image_free(&image_); }
  PngImage(const PngImage&) = delete;
  PngImage& operator=(const PngImage&) = delete;

  png_image* get() { return &image_; }
  // libpng's message for the last failure (the simplified API never prints it).
  Status Error(std::string_view what) const {
    std::string message(image_.message, strnlen(image_.message, sizeof image_.message));
    if (message.empty()) message = "unknown libpng error";
    // libpng's memory reader says only this when the bytes end early.
    if (message == "read beyond end of data") message = "truncated (" + message + ")";
    return InvalidArgumentError("image: " + std::string(what) + ": " + message);
  }

 private:
  png_image image_;
};

StatusOr<DecodedImage> DecodePng(std::string_view bytes) {
  PngImage png;
  if (png_image_begin_read_from_memory(png.get(), bytes.data(), bytes.size()) == 0) {
    return png.Error("corrupt PNG");
  }
  RETURN_IF_ERROR(CheckPixelCount("PNG", png.get()->width, png.get()->height));
  DecodedImage image;
  image.width = static_cast<int>(png.get()->width);
  image.height = static_cast<int>(png.get()->height);
  image.components = 4;
  // Always 8-bit RGBA: libpng's own grey conversion uses other coefficients than ours, and
  // 8-bit output is sRGB-encoded like the 8-bit JPEG path.
  png.get()->format = PNG_FORMAT_RGBA;
  const int64_t stride = int64_t{image.width} * image.components;
  image.pixels.resize(static_cast<size_t>(stride * image.height));
  if (png_image_finish_read(png.get(), /*background=*/nullptr, image.pixels.data(),
                            static_cast<png_int_32>(stride), /*colormap=*/nullptr) == 0 ||
      PNG_IMAGE_FAILED(*png.get())) {
    return png.Error("corrupt PNG");
  }
  return image;
}

struct TjDestroyer {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjDestroyer>;

Status JpegError(void* handle) {
  const char* message = tjGetErrorStr2(handle);
  return InvalidArgumentError(std::string("image: corrupt JPEG: ") +
                              (message != nullptr ? message : "unknown libjpeg error"));
}

// `pixel_format` is TJPF_GRAY or TJPF_RGB. Warnings (e.g. "Premature end of JPEG file" for a
// truncated upload) are errors: libjpeg would otherwise fill the missing part with grey.
StatusOr<DecodedImage> DecodeJpeg(std::string_view bytes, int pixel_format) {
  TjHandle handle(tjInitDecompress());
  if (handle == nullptr) {
    return InternalError(std::string("image: cannot start the JPEG decoder: ") +
                         tjGetErrorStr2(nullptr));
  }
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), data, bytes.size(), &width, &height, &subsampling,
                          &colorspace) != 0) {
    return JpegError(handle.get());
  }
  if (width <= 0 || height <= 0) {
    // libjpeg's memory source fakes an end-of-image marker when the bytes run out, so a
    // datastream cut before its frame header reads as "tables only": no error, no size.
    return InvalidArgumentError("image: corrupt JPEG: no image frame (truncated?)");
  }
  RETURN_IF_ERROR(CheckPixelCount("JPEG", width, height));
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return InvalidArgumentError("image: CMYK JPEGs are not supported (send RGB or greyscale)");
  }
  DecodedImage image;
  image.width = width;
  image.height = height;
  image.components = tjPixelSize[pixel_format];
  const int64_t stride = int64_t{width} * image.components;
  image.pixels.resize(static_cast<size_t>(stride * height));
  if (tjDecompress2(handle.get(), data, bytes.size(), image.pixels.data(), width,
                    static_cast<int>(stride), height, pixel_format,
                    TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0) {
    return JpegError(handle.get());
  }
  return image;
}

const uint8_t* PixelAt(const DecodedImage& image, int x, int y) {
  return image.pixels.data() +
         (int64_t{y} * image.width + x) * static_cast<int64_t>(image.components);
}

// Luminance in [0, 1], alpha composited over black.
float Luminance(const uint8_t* p, int components) {
  if (components == 1) return p[0] / 255.0f;
  const float rgb = 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2];
  if (components == 4) return rgb * p[3] / (255.0f * 255.0f);
  return rgb / 255.0f;
}

// Channel c (0..2) in [0, 1], alpha composited over black.
float Channel(const uint8_t* p, int components, int c) {
  if (components == 1) return p[0] / 255.0f;
  if (components == 4) return static_cast<float>(p[c]) * p[3] / (255.0f * 255.0f);
  return p[c] / 255.0f;
}

// Mean luminance of the outermost ring of pixels, each counted once.
double BorderLuminanceMean(const DecodedImage& image) {
  const int w = image.width, h = image.height, n = image.components;
  double sum = 0;
  int64_t count = 0;
  auto add = [&](int x, int y) {
    sum += Luminance(PixelAt(image, x, y), n);
    ++count;
  };
  for (int x = 0; x < w; ++x) {
    add(x, 0);
    if (h > 1) add(x, h - 1);
  }
  for (int y = 1; y < h - 1; ++y) {
    add(0, y);
    if (w > 1) add(w - 1, y);
  }
  return sum / static_cast<double>(count);
}

// The source samples one output index along one axis reads, with weights summing to 1.
// Indices are contiguous and ascending, and both ends never decrease from one output index
// to the next.
struct Tap {
  int index;
  float weight;
};
using AxisMap = std::vector<std::vector<Tap>>;

// Shrinking (dst <= src): each output sample averages the source interval it covers, with
// partly covered source samples weighted by their coverage. Enlarging: bilinear with
// pixel centres at +0.5.
AxisMap BuildAxisMap(int64_t src, int64_t dst) {
  AxisMap map(static_cast<size_t>(dst));
  if (dst <= src) {
    // In units of 1/dst of a source sample, output o covers [o*src, (o+1)*src) and source
    // sample i covers [i*dst, (i+1)*dst): integer arithmetic, exact coverage.
    for (int64_t o = 0; o < dst; ++o) {
      const int64_t lo = o * src, hi = (o + 1) * src;
      for (int64_t i = lo / dst; i * dst < hi; ++i) {
        const int64_t overlap = std::min(hi, (i + 1) * dst) - std::max(lo, i * dst);
        map[o].push_back({static_cast<int>(i), static_cast<float>(overlap) / src});
      }
    }
    return map;
  }
  for (int64_t o = 0; o < dst; ++o) {
    double x = (o + 0.5) * static_cast<double>(src) / static_cast<double>(dst) - 0.5;
    x = std::clamp(x, 0.0, static_cast<double>(src - 1));
    const int i0 = static_cast<int>(x);
    const float f = static_cast<float>(x - i0);
    map[o].push_back({i0, 1.0f - f});
    if (i0 + 1 < src) map[o].push_back({i0 + 1, f});
  }
  return map;
}

// Resamples `image` to target_w x target_h and adds it into the planar `out` (H x W per
// channel) at (left, top). Streams over source rows once, so memory is one source row plus
// one resampled row, whatever the image size.
void ResampleInto(const DecodedImage& image, int channels, int target_w, int target_h, int left,
                  int top, int out_h, int out_w, float* out) {
  const int w = image.width;
  const AxisMap x_map = BuildAxisMap(w, target_w);
  const AxisMap y_map = BuildAxisMap(image.height, target_h);
  std::vector<float> row(static_cast<size_t>(channels) * w);
  std::vector<float> resampled_row(static_cast<size_t>(channels) * target_w);
  int first_oy = 0;
  for (int y = 0; y < image.height; ++y) {
    while (first_oy < target_h && y_map[first_oy].back().index < y) ++first_oy;
    if (first_oy == target_h) break;
    bool row_ready = false;
    for (int oy = first_oy; oy < target_h && y_map[oy].front().index <= y; ++oy) {
      const std::vector<Tap>& taps = y_map[oy];
      const size_t k = static_cast<size_t>(y - taps.front().index);
      if (k >= taps.size()) continue;
      if (!row_ready) {
        for (int x = 0; x < w; ++x) {
          const uint8_t* p = PixelAt(image, x, y);
          if (channels == 1) {
            row[x] = Luminance(p, image.components);
          } else {
            for (int c = 0; c < channels; ++c) {
              row[static_cast<size_t>(c) * w + x] = Channel(p, image.components, c);
            }
          }
        }
        for (int c = 0; c < channels; ++c) {
          for (int ox = 0; ox < target_w; ++ox) {
            float sum = 0;
            for (const Tap& tap : x_map[ox]) {
              sum += tap.weight * row[static_cast<size_t>(c) * w + tap.index];
            }
            resampled_row[static_cast<size_t>(c) * target_w + ox] = sum;
          }
        }
        row_ready = true;
      }
      for (int c = 0; c < channels; ++c) {
        float* dst = out + (static_cast<size_t>(c) * out_h + top + oy) * out_w + left;
        const float* src = resampled_row.data() + static_cast<size_t>(c) * target_w;
        for (int ox = 0; ox < target_w; ++ox) dst[ox] += taps[k].weight * src[ox];
      }
    }
  }
}

// Dispatches on the signature; JPEGs are decoded straight to grey when that is all we need.
StatusOr<DecodedImage> Decode(std::string_view bytes, int channels) {
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kPng:
      return DecodePng(bytes);
    case ImageFormat::kJpeg:
      return DecodeJpeg(bytes, channels == 1 ? TJPF_GRAY : TJPF_RGB);
    case ImageFormat::kNone:
      break;
  }
  if (bytes.empty()) return InvalidArgumentError("image: empty, not a PNG or JPEG");
  return InvalidArgumentError("image: not a PNG or JPEG (first bytes " + FirstBytesHex(bytes) +
                              ")");
}

}  // namespace

ImageFormat SniffImageFormat(std::string_view bytes) {
  static constexpr std::string_view kPngSignature("\x89PNG\r\n\x1a\n", 8);
  static constexpr std::string_view kJpegSignature("\xff\xd8\xff", 3);
  if (bytes.starts_with(kPngSignature)) return ImageFormat::kPng;
  if (bytes.starts_with(kJpegSignature)) return ImageFormat::kJpeg;
  return ImageFormat::kNone;
}

StatusOr<std::vector<float>> DecodeImage(std::string_view bytes, int channels, int height,
                                         int width, const FitOptions& options) {
  if (channels != 1 && channels != 3) {
    return InvalidArgumentError("image: channels must be 1 or 3, not " + std::to_string(channels));
  }
  if (height < 1 || height > kMaxOutputSide || width < 1 || width > kMaxOutputSide) {
    return InvalidArgumentError("image: the model input must be 1 to " +
                                std::to_string(kMaxOutputSide) + " pixels on each side, not " +
                                std::to_string(height) + " x " + std::to_string(width));
  }
  ASSIGN_OR_RETURN(const DecodedImage image, Decode(bytes, channels));

  const bool invert = options.invert_light_background && BorderLuminanceMean(image) > 0.5;
  const double scale = std::min(static_cast<double>(height) / image.height,
                                static_cast<double>(width) / image.width);
  const int target_w =
      static_cast<int>(std::clamp<double>(std::lround(image.width * scale), 1, width));
  const int target_h =
      static_cast<int>(std::clamp<double>(std::lround(image.height * scale), 1, height));
  const int left = (width - target_w) / 2;
  const int top = (height - target_h) / 2;

  // The padding stays 0 (black) whether or not the image itself is inverted.
  std::vector<float> out(static_cast<size_t>(channels) * height * width, 0.0f);
  ResampleInto(image, channels, target_w, target_h, left, top, height, width, out.data());
  for (int c = 0; c < channels; ++c) {
    for (int oy = top; oy < top + target_h; ++oy) {
      float* p = out.data() + (static_cast<size_t>(c) * height + oy) * width;
      for (int ox = left; ox < left + target_w; ++ox) {
        // Weights sum to 1, so inverting after resampling equals inverting the source.
        p[ox] = std::clamp(invert ? 1.0f - p[ox] : p[ox], 0.0f, 1.0f);
      }
    }
  }
  return out;
}

}  // namespace tarn::serve
