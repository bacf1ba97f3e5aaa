#include "serve/image_decode.h"

#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tarn::serve {
namespace {

constexpr float kByte = 1.0f / 255.0f;

// Encodes 8-bit pixels (PNG_FORMAT_GRAY, _RGB or _RGBA) with libpng's simplified writer.
std::string EncodePng(int width, int height, png_uint_32 format,
                      const std::vector<uint8_t>& pixels) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = width;
  image.height = height;
  image.format = format;
  png_alloc_size_t size = 0;
  EXPECT_NE(png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr), 0)
      << image.message;
  std::string out(size, '\0');
  EXPECT_NE(png_image_write_to_memory(&image, out.data(), &size, 0, pixels.data(), 0, nullptr), 0)
      << image.message;
  out.resize(size);
  return out;
}

std::string EncodeJpeg(int width, int height, int pixel_format, const std::vector<uint8_t>& pixels,
                       int subsampling = TJSAMP_444) {
  tjhandle handle = tjInitCompress();
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(handle, pixels.data(), width, 0, height, pixel_format, &buffer, &size,
                        subsampling, /*jpegQual=*/95, TJFLAG_ACCURATEDCT),
            0)
      << tjGetErrorStr2(handle);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  tjFree(buffer);
  tjDestroy(handle);
  return out;
}

// A grey image from f(x, y).
template <typename F>
std::vector<uint8_t> Grey(int width, int height, F f) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) pixels[y * width + x] = static_cast<uint8_t>(f(x, y));
  }
  return pixels;
}

// CRC-32 as PNG chunks use it (ISO 3309), bit by bit.
uint32_t Crc32(const uint8_t* data, size_t size) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

void PutBigEndian32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (24 - 8 * i));
}

FitOptions NoInvert() {
  FitOptions options;
  options.invert_light_background = false;
  return options;
}

void ExpectInvalidArgument(const StatusOr<std::vector<float>>& result, const std::string& part) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find(part), std::string::npos)
      << result.status().message() << " does not contain " << part;
}

TEST(SniffImageFormatTest, RecognisesSignatures) {
  EXPECT_EQ(SniffImageFormat(EncodePng(1, 1, PNG_FORMAT_GRAY, {0})), ImageFormat::kPng);
  EXPECT_EQ(SniffImageFormat(EncodeJpeg(8, 8, TJPF_GRAY, std::vector<uint8_t>(64), TJSAMP_GRAY)),
            ImageFormat::kJpeg);
  EXPECT_EQ(SniffImageFormat("<html>"), ImageFormat::kNone);
  EXPECT_EQ(SniffImageFormat(""), ImageFormat::kNone);
  EXPECT_EQ(SniffImageFormat("\x89PN"), ImageFormat::kNone);
}

TEST(DecodeImageTest, GreyPngRoundTripIsExact) {
  const std::vector<uint8_t> pixels =
      Grey(28, 28, [](int x, int y) { return (x * 37 + y * 11) % 256; });
  StatusOr<std::vector<float>> out =
      DecodeImage(EncodePng(28, 28, PNG_FORMAT_GRAY, pixels), 1, 28, 28, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 28u * 28u);
  for (size_t i = 0; i < pixels.size(); ++i) {
    EXPECT_NEAR((*out)[i], pixels[i] / 255.0f, 1e-6) << "pixel " << i;
  }
}

TEST(DecodeImageTest, ShrinkByTwoAveragesEachTwoByTwoBlock) {
  const std::vector<uint8_t> pixels =
      Grey(56, 56, [](int x, int y) { return (x * 7 + y * 29) % 256; });
  StatusOr<std::vector<float>> out =
      DecodeImage(EncodePng(56, 56, PNG_FORMAT_GRAY, pixels), 1, 28, 28, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int y = 0; y < 28; ++y) {
    for (int x = 0; x < 28; ++x) {
      const int sum = pixels[(2 * y) * 56 + 2 * x] + pixels[(2 * y) * 56 + 2 * x + 1] +
                      pixels[(2 * y + 1) * 56 + 2 * x] + pixels[(2 * y + 1) * 56 + 2 * x + 1];
      EXPECT_NEAR((*out)[y * 28 + x], sum / (4 * 255.0f), 1e-5) << x << "," << y;
    }
  }
}

TEST(DecodeImageTest, ShrinkByOneAndAHalfWeighsPartlyCoveredPixels) {
  // Columns repeat 0, 255, 90. Output column 0 covers source [0, 1.5): (0 + 0.5 * 255) / 1.5;
  // output column 1 covers [1.5, 3): (0.5 * 255 + 90) / 1.5.
  const int pattern[3] = {0, 255, 90};
  const std::vector<uint8_t> pixels = Grey(42, 42, [&](int x, int) { return pattern[x % 3]; });
  StatusOr<std::vector<float>> out =
      DecodeImage(EncodePng(42, 42, PNG_FORMAT_GRAY, pixels), 1, 28, 28, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const float even = (0.5f * 255) / 1.5f / 255, odd = (0.5f * 255 + 90) / 1.5f / 255;
  for (int y = 0; y < 28; ++y) {
    for (int x = 0; x < 28; ++x) {
      EXPECT_NEAR((*out)[y * 28 + x], x % 2 == 0 ? even : odd, 1e-5) << x << "," << y;
    }
  }
}

TEST(DecodeImageTest, LargeShrinkKeepsTheMean) {
  // 2800 x 1400 random noise: each output pixel of the 28 x 14 band averages 100 x 100 pixels.
  std::mt19937 random(7);
  const std::vector<uint8_t> pixels = Grey(2800, 1400, [&](int, int) { return random() % 256; });
  StatusOr<std::vector<float>> out =
      DecodeImage(EncodePng(2800, 1400, PNG_FORMAT_GRAY, pixels), 1, 28, 28, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int y = 0; y < 14; ++y) {
    for (int x = 0; x < 28; ++x) {
      double sum = 0;
      for (int sy = 0; sy < 100; ++sy) {
        for (int sx = 0; sx < 100; ++sx) sum += pixels[(y * 100 + sy) * 2800 + x * 100 + sx];
      }
      EXPECT_NEAR((*out)[(y + 7) * 28 + x], sum / (100 * 100 * 255.0), 1e-4);
    }
  }
}

TEST(DecodeImageTest, NonSquareImageIsCentredWithBlackPadding) {
  // 28 wide x 14 high fits at scale 1, rows 7..20.
  const std::vector<uint8_t> pixels = Grey(28, 14, [](int, int) { return 200; });
  StatusOr<std::vector<float>> out =
      DecodeImage(EncodePng(28, 14, PNG_FORMAT_GRAY, pixels), 1, 28, 28, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int y = 0; y < 28; ++y) {
    const float expected = (y >= 7 && y < 21) ? 200 * kByte : 0.0f;
    for (int x = 0; x < 28; ++x) EXPECT_NEAR((*out)[y * 28 + x], expected, 1e-6) << x << "," << y;
  }
  // A tall one (10 x 40 into 28 x 28: scale 0.7, 7 x 28) is centred horizontally, columns 10..16.
  StatusOr<std::vector<float>> tall =
      DecodeImage(EncodePng(10, 40, PNG_FORMAT_GRAY, Grey(10, 40, [](int, int) { return 200; })), 1,
                  28, 28, NoInvert());
  ASSERT_TRUE(tall.ok()) << tall.status().ToString();
  for (int x = 0; x < 28; ++x) {
    const float expected = (x >= 10 && x < 17) ? 200 * kByte : 0.0f;
    for (int y = 0; y < 28; ++y) EXPECT_NEAR((*tall)[y * 28 + x], expected, 1e-5) << x << "," << y;
  }
}

TEST(DecodeImageTest, EnlargingIsBilinear) {
  // [0, 255] (2 x 1) into 4 x 4: scale 2 gives 4 x 2 at rows 1..2. Sample centres map to
  // source x = -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1).
  StatusOr<std::vector<float>> out =
      DecodeImage(EncodePng(2, 1, PNG_FORMAT_GRAY, {0, 255}), 1, 4, 4, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::vector<float> expected = {0, 0, 0, 0, 0, 0.25, 0.75, 1, 0, 0.25, 0.75, 1, 0, 0, 0, 0};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR((*out)[i], expected[i], 1e-6) << i;
}

TEST(DecodeImageTest, LightBackgroundIsInvertedAndDarkIsNot) {
  auto object = [](int background, int foreground) {
    return Grey(28, 28, [=](int x, int y) {
      return (x >= 10 && x < 18 && y >= 10 && y < 18) ? foreground : background;
    });
  };
  const std::string light = EncodePng(28, 28, PNG_FORMAT_GRAY, object(230, 20));
  const std::string dark = EncodePng(28, 28, PNG_FORMAT_GRAY, object(20, 230));

  StatusOr<std::vector<float>> inverted = DecodeImage(light, 1, 28, 28);
  ASSERT_TRUE(inverted.ok()) << inverted.status().ToString();
  EXPECT_NEAR((*inverted)[0], 1 - 230 * kByte, 1e-6);
  EXPECT_NEAR((*inverted)[14 * 28 + 14], 1 - 20 * kByte, 1e-6);

  StatusOr<std::vector<float>> kept = DecodeImage(dark, 1, 28, 28);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_NEAR((*kept)[0], 20 * kByte, 1e-6);
  EXPECT_NEAR((*kept)[14 * 28 + 14], 230 * kByte, 1e-6);

  StatusOr<std::vector<float>> not_asked = DecodeImage(light, 1, 28, 28, NoInvert());
  ASSERT_TRUE(not_asked.ok()) << not_asked.status().ToString();
  EXPECT_NEAR((*not_asked)[0], 230 * kByte, 1e-6);
}

TEST(DecodeImageTest, InvertedImageKeepsBlackPadding) {
  // Light 28 x 14: the image rows are inverted, the padding rows stay 0.
  StatusOr<std::vector<float>> out = DecodeImage(
      EncodePng(28, 14, PNG_FORMAT_GRAY, Grey(28, 14, [](int, int) { return 255; })), 1, 28, 28);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int y = 0; y < 28; ++y) EXPECT_EQ((*out)[y * 28 + 5], 0.0f) << y;
  EXPECT_EQ((*out)[0], 0.0f);
}

TEST(DecodeImageTest, RgbaPngIsCompositedOverBlack) {
  // 3 x 1: opaque red, half-transparent green, transparent white. Fitted 1:1 into 1 x 3.
  const std::vector<uint8_t> rgba = {255, 0, 0, 255, 0, 255, 0, 128, 255, 255, 255, 0};
  const std::string png = EncodePng(3, 1, PNG_FORMAT_RGBA, rgba);
  StatusOr<std::vector<float>> grey = DecodeImage(png, 1, 1, 3, NoInvert());
  ASSERT_TRUE(grey.ok()) << grey.status().ToString();
  EXPECT_NEAR((*grey)[0], 0.299, 1e-5);
  EXPECT_NEAR((*grey)[1], 0.587 * 128 / 255, 1e-5);
  EXPECT_NEAR((*grey)[2], 0.0, 1e-6);

  StatusOr<std::vector<float>> rgb = DecodeImage(png, 3, 1, 3, NoInvert());
  ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
  const std::vector<float> expected = {1, 0, 0, 0, 128 * kByte, 0, 0, 0, 0};
  ASSERT_EQ(rgb->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR((*rgb)[i], expected[i], 1e-6) << i;
}

TEST(DecodeImageTest, ThreeChannelOutputIsPlanar) {
  // 2 x 2 RGB; plane c holds channel c of each pixel in row-major order.
  const std::vector<uint8_t> rgb = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120};
  StatusOr<std::vector<float>> out =
      DecodeImage(EncodePng(2, 2, PNG_FORMAT_RGB, rgb), 3, 2, 2, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 12u);
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < 4; ++p) {
      EXPECT_NEAR((*out)[c * 4 + p], rgb[p * 3 + c] * kByte, 1e-6) << c << "," << p;
    }
  }
}

TEST(DecodeImageTest, JpegDecodesCloseToTheSource) {
  std::vector<uint8_t> rgb(64 * 64 * 3);
  for (int y = 0; y < 64; ++y) {
    for (int x = 0; x < 64; ++x) {
      rgb[(y * 64 + x) * 3 + 0] = static_cast<uint8_t>(x * 4);
      rgb[(y * 64 + x) * 3 + 1] = static_cast<uint8_t>(y * 4);
      rgb[(y * 64 + x) * 3 + 2] = static_cast<uint8_t>(128);
    }
  }
  const std::string jpeg = EncodeJpeg(64, 64, TJPF_RGB, rgb);
  StatusOr<std::vector<float>> out = DecodeImage(jpeg, 3, 64, 64, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < 64 * 64; ++p) {
      ASSERT_NEAR((*out)[c * 4096 + p], rgb[p * 3 + c] * kByte, 0.05) << c << "," << p;
    }
  }
  StatusOr<std::vector<float>> grey = DecodeImage(jpeg, 1, 64, 64, NoInvert());
  ASSERT_TRUE(grey.ok()) << grey.status().ToString();
  for (int p = 0; p < 64 * 64; ++p) {
    const float luminance =
        (0.299f * rgb[p * 3] + 0.587f * rgb[p * 3 + 1] + 0.114f * rgb[p * 3 + 2]) * kByte;
    ASSERT_NEAR((*grey)[p], luminance, 0.05) << p;
  }
}

TEST(DecodeImageTest, SubsampledGreyJpegShrinks) {
  const std::vector<uint8_t> pixels = Grey(56, 56, [](int, int) { return 100; });
  StatusOr<std::vector<float>> out =
      DecodeImage(EncodeJpeg(56, 56, TJPF_GRAY, pixels, TJSAMP_GRAY), 1, 28, 28, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (float v : *out) ASSERT_NEAR(v, 100 * kByte, 0.02);
}

TEST(DecodeImageTest, CmykJpegIsRefusedByName) {
  const std::string jpeg = EncodeJpeg(8, 8, TJPF_CMYK, std::vector<uint8_t>(8 * 8 * 4, 50));
  ExpectInvalidArgument(DecodeImage(jpeg, 1, 28, 28), "image: CMYK JPEGs are not supported");
}

TEST(DecodeImageTest, TruncatedPngIsInvalidArgument) {
  const std::string png =
      EncodePng(28, 28, PNG_FORMAT_GRAY, Grey(28, 28, [](int x, int y) { return (x * y) % 256; }));
  // The last 12 bytes are the IEND chunk; png.size() - 13 cuts the IDAT CRC.
  for (size_t keep : {size_t{8}, size_t{20}, size_t{33}, png.size() / 2, png.size() - 13}) {
    ExpectInvalidArgument(DecodeImage(png.substr(0, keep), 1, 28, 28),
                          "image: corrupt PNG: truncated");
  }
}

TEST(DecodeImageTest, PngCutOnlyInItsEndChunkStillDecodes) {
  // libpng's simplified reader stops after the image data and never reads IEND, so a PNG cut
  // after its last IDAT chunk has every pixel and decodes. Pinned so a change is noticed.
  const std::vector<uint8_t> pixels = Grey(28, 28, [](int x, int y) { return (x * y) % 256; });
  const std::string png = EncodePng(28, 28, PNG_FORMAT_GRAY, pixels);
  ASSERT_EQ(png.substr(png.size() - 8, 4), "IEND");
  StatusOr<std::vector<float>> out =
      DecodeImage(png.substr(0, png.size() - 12), 1, 28, 28, NoInvert());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (size_t i = 0; i < pixels.size(); ++i) EXPECT_NEAR((*out)[i], pixels[i] * kByte, 1e-6);
}

TEST(DecodeImageTest, TruncatedJpegIsInvalidArgument) {
  std::mt19937 random(1);
  std::vector<uint8_t> rgb(32 * 32 * 3);
  for (uint8_t& v : rgb) v = static_cast<uint8_t>(random());
  const std::string jpeg = EncodeJpeg(32, 32, TJPF_RGB, rgb);
  for (size_t keep : {size_t{3}, size_t{100}, jpeg.size() / 2, jpeg.size() - 2}) {
    for (int channels : {1, 3}) {
      ExpectInvalidArgument(DecodeImage(jpeg.substr(0, keep), channels, 28, 28),
                            "image: corrupt JPEG: ");
    }
  }
}

TEST(DecodeImageTest, RandomBytesAreInvalidArgument) {
  std::mt19937 random(3);
  std::string noise(1000, '\0');
  for (char& c : noise) c = static_cast<char>(random());
  noise[0] = 'x';
  ExpectInvalidArgument(DecodeImage(noise, 1, 28, 28), "not a PNG or JPEG (first bytes 78 ");
  ExpectInvalidArgument(DecodeImage("<html>", 1, 28, 28),
                        "image: not a PNG or JPEG (first bytes 3c 68 74 6d)");
  ExpectInvalidArgument(DecodeImage(std::string("\x89PNG\r\n\x1a\n", 8) + noise, 1, 28, 28),
                        "image: corrupt PNG: ");
  ExpectInvalidArgument(DecodeImage("\xff\xd8\xff" + noise, 1, 28, 28), "image: corrupt JPEG: ");
}

TEST(DecodeImageTest, EmptyInputIsInvalidArgument) {
  ExpectInvalidArgument(DecodeImage("", 1, 28, 28), "image: empty");
}

TEST(DecodeImageTest, EnormousPngIsRefusedBeforeDecoding) {
  // A real 1 x 1 PNG whose IHDR (with a recomputed CRC) claims 100000 x 100000.
  std::string png = EncodePng(1, 1, PNG_FORMAT_GRAY, {0});
  ASSERT_EQ(png.substr(12, 4), "IHDR");
  PutBigEndian32(png, 16, 100000);
  PutBigEndian32(png, 20, 100000);
  PutBigEndian32(png, 29, Crc32(reinterpret_cast<const uint8_t*>(png.data()) + 12, 17));
  ExpectInvalidArgument(DecodeImage(png, 1, 28, 28),
                        "image: PNG is 100000 x 100000 pixels, more than the 40000000 allowed");
}

TEST(DecodeImageTest, EnormousJpegIsRefusedBeforeDecoding) {
  std::string jpeg = EncodeJpeg(8, 8, TJPF_GRAY, std::vector<uint8_t>(64), TJSAMP_GRAY);
  const size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  // SOF0: marker, length (2), precision (1), height (2), width (2).
  jpeg[sof + 5] = jpeg[sof + 7] = static_cast<char>(0xfd);
  jpeg[sof + 6] = jpeg[sof + 8] = static_cast<char>(0xe8);
  ExpectInvalidArgument(DecodeImage(jpeg, 1, 28, 28),
                        "image: JPEG is 65000 x 65000 pixels, more than the 40000000 allowed");
}

TEST(DecodeImageTest, BadArgumentsAreInvalidArgument) {
  const std::string png = EncodePng(1, 1, PNG_FORMAT_GRAY, {0});
  for (int channels : {0, 2, 4, -1}) {
    ExpectInvalidArgument(DecodeImage(png, channels, 28, 28), "channels must be 1 or 3");
  }
  ExpectInvalidArgument(DecodeImage(png, 1, 0, 28), "1 to 4096 pixels");
  ExpectInvalidArgument(DecodeImage(png, 1, 28, -1), "1 to 4096 pixels");
  ExpectInvalidArgument(DecodeImage(png, 1, 4097, 28), "1 to 4096 pixels");
  EXPECT_TRUE(DecodeImage(png, 3, 4096, 1).ok());
}

}  // namespace
}  // namespace tarn::serve
