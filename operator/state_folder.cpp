#include "operator/state_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"
#include "operator/profile_store.h"

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;

namespace {

constexpr mode_t kFolderMode = 0700, kFileMode = 0600;

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::kIo, what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

StateFolder::StateFolder(std::string dir) : dir_(std::move(dir)) {}

std::string StateFolder::path(const std::string& name) const {
  return (fs::path(dir_) / name).string();
}

void StateFolder::prepare() const {
  std::error_code ec;
  const fs::path parent = fs::path(dir_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (::mkdir(dir_.c_str(), kFolderMode) != 0 && errno != EEXIST) io_error("cannot create", dir_);
  struct stat st {};
  if (::lstat(dir_.c_str(), &st) != 0) io_error("cannot inspect", dir_);
  if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))
    throw Error(ErrorKind::kInvalidArgument,
                "the state folder " + dir_ +
                    " is not a folder (a symbolic link or a file); give --state-dir DIR");
  if (st.st_uid != ::geteuid())
    throw Error(ErrorKind::kInvalidArgument,
                "the state folder " + dir_ + " belongs to user id " + std::to_string(st.st_uid) +
                    ", not to you; its files could be forged (give --state-dir DIR)");
  if ((st.st_mode & 07777) != kFolderMode && ::chmod(dir_.c_str(), kFolderMode) != 0)
    io_error("cannot make private (0700)", dir_);
}

FolderLock StateFolder::lock() const {
  prepare();
  return FolderLock(dir_);
}

std::optional<std::string> StateFolder::read(const std::string& name) const {
  const std::string p = path(name);
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    if (errno == ELOOP)
      throw Error(ErrorKind::kInvalidArgument,
                  "the state file " + p + " is a symbolic link; remove it");
    io_error("cannot read", p);
  }
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid();
  std::string text;
  if (ok) {
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ::close(fd);
        io_error("cannot read", p);
      }
      text.append(buf, size_t(n));
    }
  }
  ::close(fd);
  if (!ok)
    throw Error(ErrorKind::kInvalidArgument,
                "the state file " + p + " is not a regular file of yours; remove it");
  return text;
}

void StateFolder::write(const std::string& name, const std::string& text) const {
  prepare();
  write_file_atomically(path(name), text, kFileMode);
}

void StateFolder::remove(const std::string& name) const {
  if (::unlink(path(name).c_str()) != 0 && errno != ENOENT) io_error("cannot remove", path(name));
}

int StateFolder::open_append(const std::string& name) const {
  prepare();
  const std::string p = path(name);
  const int fd =
      ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, kFileMode);
  if (fd < 0) io_error("cannot open", p);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    ::close(fd);
    throw Error(ErrorKind::kInvalidArgument,
                "the state file " + p + " is not a regular file of yours; remove it");
  }
  if ((st.st_mode & 07777) != kFileMode && ::fchmod(fd, kFileMode) != 0) {
    ::close(fd);
    io_error("cannot make private (0600)", p);
  }
  return fd;
}

}  // namespace sparkglm::operator_tool
