// Augmentation: the training option image_batches.h applies, in a header without libtorch.
#pragma once

namespace tarn::train {

// Light augmentation that Fashion-MNIST tolerates: a horizontal flip of half the images, and
// a shift of each by up to `shift` pixels in each direction (zeros fill the border). Off by
// default.
struct Augmentation {
  bool flip = false;
  int shift = 0;  // pixels, 0..4
  bool any() const { return flip || shift > 0; }
};

}  // namespace tarn::train
