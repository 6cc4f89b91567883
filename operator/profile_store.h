#pragma once
// The profile folder as the operator tool sees it: where a named profile lives (never outside the
// folder), reading, writing atomically (a temporary file in the same folder, then rename) with a
// backup of the file replaced, and which profile `sparkglm start` uses by default.
#include <string>
#include <vector>

namespace sparkglm::operator_tool {

class ProfileStore {
 public:
  // `dir` is the profile folder; `state_dir` holds the `sparkglm profile use` choice.
  ProfileStore(std::string dir, std::string state_dir);

  const std::string& dir() const { return dir_; }
  // DIR/NAME.json. Throws Error(kInvalidArgument) for a name that is not [a-z0-9][a-z0-9._-]*
  // (so no '/' and no "..") or whose file is a symbolic link: nothing is read or written outside
  // the folder through a name.
  std::string path_of(const std::string& name) const;
  // A name (through path_of) or a path to a .json file, as `--profile` takes it.
  std::string resolve(const std::string& name_or_path) const;
  std::vector<std::string> names() const;

  struct Written {
    std::string path;
    std::string backup;  // "" when no file was replaced
  };
  // Writes `text` to path_of(name): a temporary file in the folder, flushed, then renamed over the
  // target, so a reader sees the old file or the new one, never half of one. A replaced file is
  // first copied to NAME.json.<UTC time to the nanosecond>.<pid>.bak, a name no other writer can
  // take (O_EXCL). The folder is locked (FolderLock) for the backup and the rename, so concurrent
  // writers each back up what the one before wrote. Creates the folder when missing.
  Written write(const std::string& name, const std::string& text) const;

  // The profile chosen with `sparkglm profile use` (the state folder's `profile`), "" when none.
  std::string used() const;
  void use(const std::string& name) const;  // checks the profile loads first

 private:
  std::string dir_, state_dir_;
};

// A profile's text: Error(kIo) naming the path, Error(kInvalidConfig) over the size of a profile.
std::string read_text_file(const std::string& path);
// Writes through a temporary file beside `path` created with `mode`, then rename (no backup).
void write_file_atomically(const std::string& path, const std::string& text, unsigned mode = 0644);

}  // namespace sparkglm::operator_tool
