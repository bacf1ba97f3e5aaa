#include "train/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tarn::train {
namespace {

uint32_t BigEndian32(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

StatusOr<IdxArray> ParseIdx(std::string_view bytes, const std::string& name, int expected_rank) {
  auto bad = [&](const std::string& why) { return InvalidArgumentError(name + ": " + why); };
  if (bytes.size() < 4)
    return bad("too short for an IDX header (" + std::to_string(bytes.size()) + " bytes)");
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (p[0] != 0 || p[1] != 0)
    return bad("not an IDX file (its magic number does not start with two zero bytes)");
  if (p[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", p[2]);
    return bad(std::string("element type ") + type + " is not unsigned bytes (0x08)");
  }
  const int rank = p[3];
  auto magic = [](int r) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", 0x800 + r);
    return std::string(text);
  };
  if (rank < 1 || rank > 4) return bad("unsupported number of dimensions " + std::to_string(rank));
  if (expected_rank > 0 && rank != expected_rank) {
    return bad("its magic number " + magic(rank) + " gives " + std::to_string(rank) +
               " dimensions; expected " + std::to_string(expected_rank) + " (magic " +
               magic(expected_rank) + ")");
  }
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < header) return bad("truncated header");
  IdxArray out;
  uint64_t elements = 1;
  for (int d = 0; d < rank; ++d) {
    const uint32_t size = BigEndian32(p + 4 + 4 * d);
    if (size == 0 || size > (1u << 28)) {
      return bad("dimension " + std::to_string(d) + " has size " + std::to_string(size) +
                 " (magic " + magic(rank) + ")");
    }
    elements *= size;
    if (elements > (uint64_t{1} << 34)) {
      return bad("too many elements for its magic number " + magic(rank) + " (" +
                 std::to_string(rank) + " dimensions)");
    }
    out.dims.push_back(size);
  }
  if (bytes.size() - header != elements) {
    return bad("holds " + std::to_string(bytes.size() - header) +
               " bytes of data, its header says " + std::to_string(elements) +
               (bytes.size() - header < elements ? " (truncated)" : ""));
  }
  out.data.assign(p + header, p + bytes.size());
  return out;
}

StatusOr<IdxArray> ReadIdx(const std::string& path, int rank, size_t max_bytes) {
  gzFile f = ::gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (f == nullptr) return NotFoundError(path + ": " + std::strerror(errno ? errno : ENOENT));
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const int n = ::gzread(f, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      const std::string why = ::gzerror(f, &code);
      ::gzclose(f);
      return InvalidArgumentError(path + ": corrupt gzip data (" + why + ")");
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
    if (bytes.size() > max_bytes) {
      ::gzclose(f);
      return InvalidArgumentError(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  // A gzip stream cut short reads as a short file without error: zlib says so here.
  int code = Z_OK;
  const std::string why = ::gzerror(f, &code);
  ::gzclose(f);
  if (code != Z_OK && code != Z_STREAM_END) {
    return InvalidArgumentError(path + ": corrupt or truncated gzip data (" + why + ")");
  }
  return ParseIdx(bytes, path, rank);
}

StatusOr<ImageSet> ReadImageSet(const std::string& dir, const std::string& prefix, int classes) {
  auto find = [&](const std::string& kind) {
    const std::string base = dir + "/" + prefix + "-" + kind;
    return Exists(base + ".gz") || !Exists(base) ? base + ".gz" : base;
  };
  const std::string images_path = find("images-idx3-ubyte");
  const std::string labels_path = find("labels-idx1-ubyte");
  // Images are count x rows x columns, labels a count: the magic numbers say which is which.
  ASSIGN_OR_RETURN(IdxArray images, ReadIdx(images_path, 3));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(labels_path, 1));
  if (images.dims[0] != labels.dims[0]) {
    return InvalidArgumentError(images_path + " holds " + std::to_string(images.dims[0]) +
                                " images but " + labels_path + " " +
                                std::to_string(labels.dims[0]) + " labels");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= classes) {
      return InvalidArgumentError(labels_path + ": label " + std::to_string(i) + " is " +
                                  std::to_string(labels.data[i]) + ", not below " +
                                  std::to_string(classes));
    }
  }
  ImageSet set;
  set.count = images.dims[0];
  set.rows = images.dims[1];
  set.cols = images.dims[2];
  set.pixels = std::move(images.data);
  set.labels = std::move(labels.data);
  return set;
}

const std::vector<std::string>& FashionMnistLabels() {
  static const std::vector<std::string> labels = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                  "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                  "Bag",         "Ankle boot"};
  return labels;
}

}  // namespace tarn::train
