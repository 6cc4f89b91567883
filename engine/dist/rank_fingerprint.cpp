#include "engine/dist/rank_fingerprint.h"

#include <fstream>
#include <iterator>

#include "engine/core/error.h"
#include "engine/core/sha256.h"

namespace sparkglm::dist {

nlohmann::json settings_fingerprint(const EffectiveConfig& config) {
  nlohmann::json settings = config.to_json();  // per-rank options are already left out
  settings.erase("master-port");               // the rendezvous itself: ranks that met agree on it
  settings.erase("threads");  // a host's own: results do not depend on the thread count
  nlohmann::json precision = settings.at("precision-mode");
  return {{"binary_sha256", binary_sha256()},
          {"profile_sha256", config.profile_sha256()},
          {"precision_mode", std::move(precision)},
          {"settings", std::move(settings)}};
}

std::string fingerprint_difference(const nlohmann::json& rank0, const nlohmann::json& other,
                                   int other_rank) {
  const std::string who = "rank " + std::to_string(other_rank);
  if (!other.is_object()) return who + " sent no readable fingerprint";
  for (const auto& [key, value] : rank0.items()) {
    if (!other.contains(key)) return who + "'s fingerprint lacks " + key;
    const nlohmann::json& theirs = other.at(key);
    if (value.is_object() && theirs.is_object()) {
      for (const auto& [name, v] : value.items())
        if (!theirs.contains(name) || theirs.at(name) != v)
          return who + " differs from rank 0 in " + key + "." + name + ": " +
                 (theirs.contains(name) ? theirs.at(name).dump() : "unset") + " there, " +
                 v.dump() + " on rank 0";
      for (const auto& [name, v] : theirs.items())
        if (!value.contains(name)) return who + " has " + key + "." + name + ", rank 0 has not";
    } else if (value != theirs) {
      return who + " differs from rank 0 in " + key + ": " + theirs.dump() + " there, " +
             value.dump() + " on rank 0";
    }
  }
  return "";
}

void check_same_model(Communicator& comm, const std::string& model_identity) {
  const auto all = all_gather_strings(comm, model_identity, 1 << 20);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error(ErrorKind::kInvalidArgument, "refusing to start: rank " + std::to_string(r) +
                                                   " loaded model " + all[r] + ", rank 0 " +
                                                   all[0]);
}

std::string binary_sha256() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read /proc/self/exe to fingerprint the binary");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return sha256_hex(bytes);
}

}  // namespace sparkglm::dist
