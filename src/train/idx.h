// IDX files (the MNIST format: a magic number naming the element type and the number of
// dimensions, big-endian 32-bit sizes, then the elements), plain or gzipped, and the
// Fashion-MNIST split made of two of them. Only unsigned-byte elements, the type MNIST and
// Fashion-MNIST use. No libtorch here: the trainer turns the bytes into tensors.
//
// Everything read from a file is checked: a bad magic number, a size that does not match
// the bytes, a truncated or corrupt gzip stream, labels outside 0..9, images and labels of
// different counts are INVALID_ARGUMENT naming the file and what is wrong. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tarn::train {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Parses the (already decompressed) bytes of an IDX file; `name` is used in errors. With
// `rank` > 0, a file of another number of dimensions is refused by its magic number (a label
// file is 0x00000801, an image file 0x00000803).
StatusOr<IdxArray> ParseIdx(std::string_view bytes, const std::string& name, int rank = 0);

// Reads `path`, decompressing it when it is gzipped (by its magic bytes, not its name).
// Files that would decompress to more than `max_bytes` are refused.
StatusOr<IdxArray> ReadIdx(const std::string& path, int rank = 0,
                           size_t max_bytes = size_t{1} << 30);

// One split of an MNIST-style dataset: `count` images of rows x cols bytes, and labels.
struct ImageSet {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols
  std::vector<uint8_t> labels;  // count, each < classes
};

// Reads "<dir>/<prefix>-images-idx3-ubyte[.gz]" and "<dir>/<prefix>-labels-idx1-ubyte[.gz]"
// (prefix "train" or "t10k", the names MNIST and Fashion-MNIST use) and checks that they
// belong together and that every label is below `classes`.
StatusOr<ImageSet> ReadImageSet(const std::string& dir, const std::string& prefix,
                                int classes = 10);

// The Fashion-MNIST class names, index = label.
const std::vector<std::string>& FashionMnistLabels();

}  // namespace tarn::train
