#pragma once
// An exclusive flock(2) on a folder, held for the life of the object. The operator commands that
// read the state folder and then act on it (start, stop, status, profile use) and the profile
// writes of `recipe apply` take it, so that concurrent runs take turns instead of interleaving:
// three concurrent `start` launch one server, twelve concurrent `recipe apply --yes` back up every
// version they replace. The folder itself is locked (opened O_DIRECTORY), so no lock file is left
// in a profile folder under version control. The kernel drops the lock when the process dies.
#include <string>

namespace sparkglm::operator_tool {

class FolderLock {
 public:
  // Blocks until the lock is held. Throws Error(kIo) naming the folder when it cannot be opened.
  explicit FolderLock(const std::string& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace sparkglm::operator_tool
