#pragma once
// The operator's state folder (engine.pid, engine.json, engine.log, profile): private to the user
// who runs the tool. The folder is 0700 and every file in it 0600, so no other user can read what
// a server was started with or forge what `status` and `stop` act on; a folder or file owned by
// someone else, or a symbolic link in its place, is refused rather than trusted.
#include <optional>
#include <string>

#include "operator/folder_lock.h"

namespace sparkglm::operator_tool {

class StateFolder {
 public:
  explicit StateFolder(std::string dir);

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const;  // DIR/NAME

  // Creates the folder (0700) when missing and tightens an existing one of ours to 0700.
  // Error(kInvalidArgument) naming it when it is a symbolic link, not a folder, or not ours.
  void prepare() const;
  // prepare(), then the folder's lock (see FolderLock).
  FolderLock lock() const;

  // A state file's bytes; nullopt when it does not exist. Error(kInvalidArgument) when it is not
  // a regular file owned by this user (a link or a stranger's file is never read as state).
  std::optional<std::string> read(const std::string& name) const;
  // Replaces NAME atomically (temporary file, then rename) with mode 0600.
  void write(const std::string& name, const std::string& text) const;
  void remove(const std::string& name) const;  // no error when already gone
  // NAME opened for appending (created 0600; an older, wider file is tightened). Caller closes.
  int open_append(const std::string& name) const;

 private:
  std::string dir_;
};

}  // namespace sparkglm::operator_tool
