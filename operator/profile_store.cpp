#include "operator/profile_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/options/profile.h"

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;

namespace {

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::kIo, what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read " + path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const fs::path target(path);
  std::error_code ec;
  if (!target.parent_path().empty()) fs::create_directories(target.parent_path(), ec);
  // Built by appending: GCC 12 warns (-Wrestrict) about "." + std::string + ... here.
  std::string temp_name = ".";
  temp_name.append(target.filename().string()).append(".tmp.").append(std::to_string(getpid()));
  const std::string temp = (target.parent_path() / temp_name).string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) io_error("cannot create", temp);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      ::unlink(temp.c_str());
      io_error("cannot write", temp);
    }
    done += size_t(n);
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
  if (fs::exists(w.path)) {
    w.backup = w.path + "." + utc_stamp() + ".bak";
    for (int n = 1; fs::exists(w.backup); ++n)
      w.backup = w.path + "." + utc_stamp() + "-" + std::to_string(n) + ".bak";
    fs::copy_file(w.path, w.backup, ec);
    if (ec)
      throw Error(ErrorKind::kIo, "cannot keep a backup of " + w.path + " as " + w.backup + ": " +
                                      ec.message() + " (nothing was written)");
  }
  write_file_atomically(w.path, text);
  return w;
}

std::string ProfileStore::used() const {
  std::ifstream in(fs::path(state_dir_) / "profile");
  std::string name;
  std::getline(in, name);
  return name;
}

void ProfileStore::use(const std::string& name_or_path) const {
  const std::string path = resolve(name_or_path);
  Profile::load(path, dir_);  // throws when it does not validate
  const std::string recorded =
      is_profile_path(name_or_path) ? fs::absolute(path).lexically_normal().string() : name_or_path;
  write_file_atomically((fs::path(state_dir_) / "profile").string(), recorded + "\n");
}

}  // namespace sparkglm::operator_tool
