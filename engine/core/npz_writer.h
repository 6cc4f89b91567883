#pragma once
// Writes float32 arrays as a NumPy .npz (an uncompressed zip of .npy files), so Python tests and
// notebooks read engine outputs with numpy.load and nothing else.
#include <cstdint>
#include <string>
#include <vector>

namespace sparkglm {

struct NpzArray {
  std::string name;  // becomes name.npy inside the archive
  std::vector<int64_t> shape;
  const float* data = nullptr;  // prod(shape) values, C order
};

void write_npz(const std::string& path, const std::vector<NpzArray>& arrays);

}  // namespace sparkglm
