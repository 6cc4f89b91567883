#pragma once
// The fixture bundles of tests/data/reports (written by make_fixtures.py) and scratch copies of
// them that a test may edit: a copy lives in its own temporary folder, removed with the object.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "reports/bundle_view.h"
#include "tests/support/build_paths.h"

namespace sparkglm::reports::testing {

inline const char* kMeasurementId = "2026-11-29-g2-tinyglm-micro-measurement";
inline const char* kAbId = "2026-11-29-g2-kv-fp8-g128-ab";

inline std::filesystem::path fixture(const std::string& id) {
  return std::filesystem::path(sparkglm::testing::test_data_dir()) / "reports" / id;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A copy of a fixture bundle under a fresh temporary folder, named like the original.
class ScratchBundle {
 public:
  ScratchBundle(const std::string& id, const std::string& tag) {
    root_ = std::filesystem::temp_directory_path() /
            ("sparkglm-reports-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    dir_ = root_ / id;
    std::filesystem::copy(fixture(id), dir_, std::filesystem::copy_options::recursive);
  }
  ~ScratchBundle() { std::filesystem::remove_all(root_); }
  ScratchBundle(const ScratchBundle&) = delete;
  ScratchBundle& operator=(const ScratchBundle&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& root() const { return root_; }
  nlohmann::json json(const std::string& path) const {
    return nlohmann::json::parse(read_text(dir_ / path));
  }
  void set_json(const std::string& path, const nlohmann::json& j) const {
    write_text(dir_ / path, j.dump(2) + "\n");
  }
  // Edits one JSON file of the bundle in place.
  template <typename Edit>
  void edit(const std::string& path, Edit edit) const {
    nlohmann::json j = json(path);
    edit(j);
    set_json(path, j);
  }
  BundleView load() const { return load_bundle(dir_); }

 private:
  std::filesystem::path root_, dir_;
};

}  // namespace sparkglm::reports::testing
