#pragma once
// The identity of this binary, stamped at build time (cmake/build_info.cmake).
#include <string>

namespace sparkglm {

struct BuildInfo {
  const char* version;
  const char* commit;
  const char* clean_tree;  // "true", "false" or "unknown"
  const char* compiler;
  const char* build_type;
  const char* cuda_version;  // empty when built without CUDA
  const char* nccl_version;  // empty when built without NCCL
};

const BuildInfo& build_info();

// The `--version` text every binary prints: one `key: value` line per identity field.
std::string version_text(const char* program);

}  // namespace sparkglm
