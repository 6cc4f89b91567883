#include "engine/runtime/prefix_store_writer.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace sparkglm {

namespace {

bool write_all(int fd, const std::byte* data, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w, n -= size_t(w), offset += uint64_t(w);
  }
  return true;
}

}  // namespace

PrefixStoreWriter::PrefixStoreWriter(int fd, size_t buffer_bytes, int buffers, Gate gate)
    : fd_(fd),
      gate_(std::move(gate)),
      buffers_(size_t(buffers), std::vector<std::byte>(buffer_bytes)) {
  for (int b = buffers - 1; b >= 0; --b) free_.push_back(b);
  thread_ = std::thread([this] { run(); });
}

PrefixStoreWriter::~PrefixStoreWriter() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    queue_.clear();  // the file goes with the store: a write not started is not needed
  }
  queued_.notify_all();
  thread_.join();
}

int PrefixStoreWriter::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  freed_.wait(lock, [this] { return !free_.empty(); });
  const int b = free_.back();
  free_.pop_back();
  return b;
}

void PrefixStoreWriter::submit(int buffer, uint64_t offset, size_t bytes, uint64_t ticket) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({buffer, offset, bytes, ticket});
  }
  queued_.notify_one();
}

std::vector<uint64_t> PrefixStoreWriter::failures() {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint64_t> out;
  out.swap(failed_);
  return out;
}

void PrefixStoreWriter::run() {
  for (;;) {
    Write w;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      w = queue_.front();
      queue_.pop_front();
    }
    const bool ok = (!gate_ || gate_()) && write_all(fd_, data(w.buffer), w.bytes, w.offset);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!ok) failed_.push_back(w.ticket);  // before the buffer is free: see the header
      free_.push_back(w.buffer);
    }
    freed_.notify_one();
  }
}

}  // namespace sparkglm
