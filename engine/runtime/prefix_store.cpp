#include "engine/runtime/prefix_store.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"

namespace sparkglm {

namespace {

constexpr const char* kLeftoverPrefix = "sparkglm-prefix-cache.";
constexpr const char* kLeftoverSuffix = ".tmp";

std::string gib(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f GiB (%llu bytes)", double(bytes) / double(1ull << 30),
                static_cast<unsigned long long>(bytes));
  return text;
}

[[noreturn]] void refuse(const std::string& dir, const std::string& why) {
  throw Error(ErrorKind::kInvalidArgument, "--prefix-cache-dir " + dir + ": " + why);
}

// Files of the unlinked-file fallback that a crash left between create and unlink.
void clear_leftovers(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t p = std::strlen(kLeftoverPrefix), s = std::strlen(kLeftoverSuffix);
    if (name.size() > p + s && name.compare(0, p, kLeftoverPrefix) == 0 &&
        name.compare(name.size() - s, s, kLeftoverSuffix) == 0)
      fs::remove(entry.path(), ec);
  }
  if (ec) refuse(dir, "cannot clear leftover files: " + ec.message());
}

int open_unlinked(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    refuse(dir, std::string("cannot create the tier's file: ") + std::strerror(errno));
  const std::string path =
      dir + "/" + kLeftoverPrefix + std::to_string(::getpid()) + kLeftoverSuffix;
  fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) refuse(dir, "cannot create " + path + ": " + std::strerror(errno));
  ::unlink(path.c_str());
  return fd;
}

bool read_all(int fd, std::byte* data, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, data, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r, n -= size_t(r), offset += uint64_t(r);
  }
  return true;
}

}  // namespace

size_t PrefixStore::staging_bytes(size_t block_bytes, size_t snapshot_bytes) {
  return size_t(kStagingBuffers) * std::max(block_bytes, snapshot_bytes);
}

PrefixStore::PrefixStore(const PrefixStoreOptions& o) : dir_(o.dir) {
  SPARKGLM_ASSERT(o.block_bytes > 0 && o.snapshot_bytes > 0, "prefix store: empty records");
  if (dir_.empty()) refuse("\"\"", "expected a directory");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir_, ec)) refuse(dir_, "not a directory");
  struct statfs fs {};
  if (::statfs(dir_.c_str(), &fs) != 0) refuse(dir_, std::strerror(errno));
  if (uint64_t(fs.f_type) == uint64_t(TMPFS_MAGIC))
    refuse(dir_,
           "is on a tmpfs, which is memory: the disk tier would spend memory to save it "
           "(name a directory on a disk)");
  const uint64_t need = o.snapshot_bytes + o.block_bytes;
  if (o.capacity_bytes < need)
    refuse(dir_, "--prefix-cache-gb " + gib(o.capacity_bytes) + " holds not one KDA snapshot (" +
                     std::to_string(o.snapshot_bytes) + " bytes) and one block (" +
                     std::to_string(o.block_bytes) + " bytes)");
  struct statvfs vfs {};
  if (::statvfs(dir_.c_str(), &vfs) != 0) refuse(dir_, std::strerror(errno));
  const uint64_t free_bytes = uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
  if (free_bytes < o.capacity_bytes)
    refuse(dir_, gib(free_bytes) + " free, --prefix-cache-gb asks for " + gib(o.capacity_bytes));
  clear_leftovers(dir_);
  fd_ = open_unlinked(dir_);

  const uint64_t snapshot_slots = std::max<uint64_t>(1, o.capacity_bytes / 4 / o.snapshot_bytes);
  const uint64_t block_slots = std::min<uint64_t>(
      (o.capacity_bytes - snapshot_slots * o.snapshot_bytes) / o.block_bytes, uint64_t(INT32_MAX));
  blocks_.slot_bytes = o.block_bytes;
  snapshots_.slot_bytes = o.snapshot_bytes;
  snapshots_.offset = block_slots * o.block_bytes;
  for (int i = int(block_slots) - 1; i >= 0; --i) blocks_.free_slots.push_back(i);
  for (int i = int(std::min<uint64_t>(snapshot_slots, INT32_MAX)) - 1; i >= 0; --i)
    snapshots_.free_slots.push_back(i);
  queued_.resize(size_t(kStagingBuffers));
  writer_ = std::make_unique<PrefixStoreWriter>(fd_, std::max(o.block_bytes, o.snapshot_bytes),
                                                kStagingBuffers, o.write_gate);
  summary_ = dir_ + ": " + gib(o.capacity_bytes) +
             " in one unlinked file: " + std::to_string(block_slots) + " block slots of " +
             std::to_string(o.block_bytes) + " bytes, " +
             std::to_string(snapshots_.free_slots.size()) + " snapshot slots of " +
             std::to_string(o.snapshot_bytes) + " bytes; host staging " +
             std::to_string(staging_bytes(o.block_bytes, o.snapshot_bytes)) + " bytes (" +
             std::to_string(kStagingBuffers) + " buffers, written on a writer thread)";
}

PrefixStore::~PrefixStore() {
  writer_.reset();  // its thread writes to fd_
  if (fd_ >= 0) ::close(fd_);
}

const PrefixStore::BlockRecord* PrefixStore::block(uint64_t key) const {
  const auto it = block_records_.find(key);
  return it == block_records_.end() ? nullptr : &it->second;
}

std::byte* PrefixStore::spill_buffer() {
  return writer_->data(take_buffer());
}

void PrefixStore::put_block(uint64_t key, const BlockRecord& record) {
  put(blocks_, key);
  block_records_[key] = record;
}

void PrefixStore::put_snapshot(uint64_t key) {
  put(snapshots_, key);
}

const std::byte* PrefixStore::read_block(uint64_t key) {
  const std::byte* bytes = read(blocks_, key);
  if (!bytes) block_records_.erase(key);
  return bytes;
}

const std::byte* PrefixStore::read_snapshot(uint64_t key) {
  return read(snapshots_, key);
}

int PrefixStore::reap() {
  apply_failures();
  const int n = failed_writes_;
  failed_writes_ = 0;
  return n;
}

int PrefixStore::take_buffer() {
  if (engine_buffer_ < 0) engine_buffer_ = writer_->acquire();
  apply_failures();  // first: queued_ names the failed write until the buffer is filled again
  queued_[size_t(engine_buffer_)] = {};
  return engine_buffer_;
}

void PrefixStore::apply_failures() {
  for (const uint64_t ticket : writer_->failures()) {
    ++failed_writes_;
    for (const Queued& q : queued_) {
      if (q.ticket != ticket) continue;
      const auto it = q.shelf->index.find(q.key);
      if (it == q.shelf->index.end() || it->second.ticket != ticket) break;  // put again, or gone
      if (q.shelf == &blocks_) block_records_.erase(q.key);
      drop(*q.shelf, q.key);
      break;
    }
  }
}

void PrefixStore::put(Shelf& shelf, uint64_t key) {
  SPARKGLM_ASSERT(engine_buffer_ >= 0, "prefix store: a put without spill_buffer()");
  auto it = shelf.index.find(key);
  if (it == shelf.index.end()) {
    if (shelf.free_slots.empty()) {  // the least recently used record makes room
      const uint64_t oldest = shelf.order.front();
      if (&shelf == &blocks_) block_records_.erase(oldest);
      drop(shelf, oldest);
    }
    shelf.order.push_back(key);
    it = shelf.index
             .emplace(key, Shelf::Entry{shelf.free_slots.back(), std::prev(shelf.order.end()), 0})
             .first;
    shelf.free_slots.pop_back();
  } else {
    shelf.order.splice(shelf.order.end(), shelf.order, it->second.at);
  }
  // A slot whose earlier write is still queued is written again behind it: the writer keeps order.
  it->second.ticket = ++tickets_;
  const uint64_t offset = shelf.offset + uint64_t(it->second.slot) * shelf.slot_bytes;
  writer_->submit(engine_buffer_, offset, shelf.slot_bytes, tickets_);
  queued_[size_t(engine_buffer_)] = {tickets_, &shelf, key};
  engine_buffer_ = -1;
}

const std::byte* PrefixStore::read(Shelf& shelf, uint64_t key) {
  apply_failures();
  auto it = shelf.index.find(key);
  if (it == shelf.index.end()) return nullptr;
  shelf.order.splice(shelf.order.end(), shelf.order, it->second.at);
  for (size_t b = 0; b < queued_.size(); ++b)
    if (queued_[b].ticket == it->second.ticket) return writer_->data(int(b));
  // Its write is done, and it succeeded: a buffer is taken again only after its write, and a
  // failure is applied before that.
  const int b = take_buffer();
  it = shelf.index.find(key);  // still there: take_buffer() dropped only failed writes' records
  const uint64_t offset = shelf.offset + uint64_t(it->second.slot) * shelf.slot_bytes;
  if (read_all(fd_, writer_->data(b), shelf.slot_bytes, offset)) return writer_->data(b);
  drop(shelf, key);
  return nullptr;
}

void PrefixStore::clear() {
  for (Shelf* shelf : {&blocks_, &snapshots_})
    while (!shelf->order.empty()) drop(*shelf, shelf->order.front());
  block_records_.clear();
}

void PrefixStore::drop(Shelf& shelf, uint64_t key) {
  const auto it = shelf.index.find(key);
  shelf.free_slots.push_back(it->second.slot);
  shelf.order.erase(it->second.at);
  shelf.index.erase(it);
}

}  // namespace sparkglm
