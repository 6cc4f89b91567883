#include "engine/dist/communicator.h"

#include <algorithm>

#include "engine/core/error.h"

namespace sparkglm::dist {

std::vector<uint8_t> broadcast_message(Communicator& comm, std::vector<uint8_t> message, int root,
                                       size_t max_bytes) {
  uint64_t size = message.size();
  comm.broadcast(&size, sizeof size, root);
  if (size > max_bytes)
    throw Error(ErrorKind::kDeviceFatal, "rank " + std::to_string(root) + " broadcast " +
                                             std::to_string(size) + " bytes; at most " +
                                             std::to_string(max_bytes) + " are expected");
  message.resize(size_t(size));
  if (size > 0) comm.broadcast(message.data(), size_t(size), root);
  return message;
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine,
                                            size_t max_bytes) {
  if (mine.size() > max_bytes)
    throw Error(ErrorKind::kInvalidArgument, "all_gather_strings: " + std::to_string(mine.size()) +
                                                 " bytes is over the limit of " +
                                                 std::to_string(max_bytes));
  const size_t world = size_t(comm.world_size());
  std::vector<uint64_t> sizes(world);
  const uint64_t my_size = mine.size();
  comm.all_gather(&my_size, sizeof my_size, sizes.data());
  const uint64_t width = *std::max_element(sizes.begin(), sizes.end());
  if (width > max_bytes)
    throw Error(ErrorKind::kDeviceFatal, "all_gather_strings: a rank sent " +
                                             std::to_string(width) + " bytes, over the limit");
  std::string padded = mine;
  padded.resize(size_t(width));
  std::string all(size_t(width) * world, '\0');
  if (width > 0) comm.all_gather(padded.data(), size_t(width), all.data());
  std::vector<std::string> out(world);
  for (size_t r = 0; r < world; ++r) out[r] = all.substr(r * size_t(width), size_t(sizes[r]));
  return out;
}

}  // namespace sparkglm::dist
