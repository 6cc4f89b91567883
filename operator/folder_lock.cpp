#include "operator/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace sparkglm::operator_tool {

FolderLock::FolderLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0)
    throw Error(ErrorKind::kIo,
                "cannot open the folder " + dir + " to lock it: " + std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    throw Error(ErrorKind::kIo, "cannot lock the folder " + dir + ": " + std::strerror(err));
  }
}

FolderLock::~FolderLock() {
  ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace sparkglm::operator_tool
