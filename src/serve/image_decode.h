// Image inputs for tarn-serve: a PNG or JPEG a client sends (base64 in a JSON body) is
// decoded and fitted to the model's input, so that a client can send a photo where the
// model expects a [C, H, W] float32 tensor of pixels in [0, 1].
//
// Decoding uses libpng's simplified API and libjpeg-turbo's TurboJPEG API (neither needs
// setjmp in our code). Fitting keeps the aspect ratio: the image is scaled to fit inside
// H x W (box-averaged when shrinking, bilinear when enlarging), centred, and the rest is
// filled with the background. Models trained on Fashion-MNIST see light objects on black;
// photos are mostly dark objects on a light background, so with `invert_light_background`
// an image whose border is mostly light is inverted (1 - v) first.
//
// Pure functions; thread-safe. Anything in `bytes` is outside input: every failure is a
// Status (InvalidArgument) naming what was wrong, never a crash, and images over
// kMaxImagePixels are refused before their pixels are allocated.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tarn::serve {

inline constexpr int64_t kMaxImagePixels = 40'000'000;  // e.g. 8000 x 5000

enum class ImageFormat { kNone, kPng, kJpeg };

// Recognises the format from the signature bytes alone.
ImageFormat SniffImageFormat(std::string_view bytes);

struct FitOptions {
  bool invert_light_background = true;
};

// Decodes `bytes` (PNG or JPEG) and returns channels * height * width floats, planar
// ([C, H, W]), in [0, 1]. channels 1: luminance (0.299 R + 0.587 G + 0.114 B; alpha is
// composited over black); channels 3: RGB. REQUIRES: channels in {1, 3}, height and width
// in [1, 4096].
StatusOr<std::vector<float>> DecodeImage(std::string_view bytes, int channels, int height,
                                         int width, const FitOptions& options = {});

}  // namespace tarn::serve
