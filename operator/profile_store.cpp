#include "operator/profile_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/options/profile.h"
#include "operator/folder_lock.h"
#include "operator/state_folder.h"

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;

namespace {

// Backup names must not collide: twelve writers in one second each keep their own. Nanoseconds
// and the pid make a clash unlikely; O_EXCL in write_backup() makes one harmless.
std::string backup_stamp() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  std::tm utc{};
  gmtime_r(&now.tv_sec, &utc);
  char text[48];
  const size_t n = std::strftime(text, sizeof text, "%Y%m%dT%H%M%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%09ldZ.%d", long(now.tv_nsec), int(getpid()));
  return text;
}

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::kIo, what + " " + path + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_error("cannot write", path);
    done += size_t(n);
  }
}

// Copies `path` to a backup name no other writer holds (created with O_EXCL, never replaced).
std::string write_backup(const std::string& path) {
  const std::string text = read_text_file(path);
  struct stat st {};
  const mode_t mode = ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 0666) : 0644;
  const std::string stem = path + "." + backup_stamp();
  for (int n = 0;; ++n) {
    const std::string backup = stem + (n == 0 ? "" : "-" + std::to_string(n)) + ".bak";
    const int fd = ::open(backup.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) io_error("cannot keep a backup (nothing was written) as", backup);
    try {
      write_all(fd, text, backup);
    } catch (const Error&) {
      ::close(fd);
      ::unlink(backup.c_str());
      throw;
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) io_error("cannot flush", backup);
    return backup;
  }
}

}  // namespace

std::string read_text_file(const std::string& path) {
  return read_json_text(path, ErrorKind::kInvalidConfig, json_limits::kProfile);
}

void write_file_atomically(const std::string& path, const std::string& text, unsigned mode) {
  const fs::path target(path);
  std::error_code ec;
  if (!target.parent_path().empty()) fs::create_directories(target.parent_path(), ec);
  // Built by appending: GCC 12 warns (-Wrestrict) about "." + std::string + ... here.
  std::string temp_name = ".";
  temp_name.append(target.filename().string()).append(".tmp.").append(std::to_string(getpid()));
  const std::string temp = (target.parent_path() / temp_name).string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(mode));
  if (fd < 0) io_error("cannot create", temp);
  try {
    write_all(fd, text, temp);
  } catch (const Error&) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(temp.c_str());
    io_error("cannot flush", temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    io_error("cannot rename " + temp + " to", path);
  }
}

ProfileStore::ProfileStore(std::string dir, std::string state_dir)
    : dir_(std::move(dir)), state_dir_(std::move(state_dir)) {}

std::string ProfileStore::path_of(const std::string& name) const {
  if (!ReceiptRef::is_id(name))
    throw Error(ErrorKind::kInvalidArgument,
                "profile name \"" + name + "\": expected [a-z0-9][a-z0-9._-]* (a file inside " +
                    dir_ + ", no '/')");
  const fs::path path = fs::path(dir_) / (name + ".json");
  std::error_code ec;
  if (fs::is_symlink(path, ec))
    throw Error(ErrorKind::kInvalidArgument,
                path.string() + " is a symbolic link; profiles are plain files in " + dir_);
  return path.string();
}

std::string ProfileStore::resolve(const std::string& name_or_path) const {
  if (is_profile_path(name_or_path)) return name_or_path;
  const std::string path = path_of(name_or_path);
  if (!fs::is_regular_file(path)) {
    std::string available;
    for (const std::string& n : names()) available += (available.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::kInvalidArgument,
                "no profile \"" + name_or_path + "\" in " + dir_ +
                    " (available: " + (available.empty() ? "none" : available) + ")");
  }
  return path;
}

std::vector<std::string> ProfileStore::names() const {
  return profile_names(dir_);
}

ProfileStore::Written ProfileStore::write(const std::string& name, const std::string& text) const {
  Written w;
  w.path = path_of(name);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // Backup and replacement are one step for concurrent writers: each backs up the file the one
  // before it wrote, so no version is replaced without a copy.
  const FolderLock lock(dir_);
  if (fs::exists(w.path)) w.backup = write_backup(w.path);
  write_file_atomically(w.path, text);
  return w;
}

std::string ProfileStore::used() const {
  const std::optional<std::string> text = StateFolder(state_dir_).read("profile");
  return text ? text->substr(0, text->find('\n')) : "";
}

void ProfileStore::use(const std::string& name_or_path) const {
  const std::string path = resolve(name_or_path);
  Profile::load(path, dir_);  // throws when it does not validate
  const std::string recorded =
      is_profile_path(name_or_path) ? fs::absolute(path).lexically_normal().string() : name_or_path;
  const StateFolder state(state_dir_);
  const FolderLock lock = state.lock();
  state.write("profile", recorded + "\n");
}

}  // namespace sparkglm::operator_tool
