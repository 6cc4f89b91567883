#pragma once
// The disk tier's file writes, off the engine thread (PrefixStore): a fixed pool of host staging
// buffers and one thread that writes them to the tier's file.
//
// The engine thread takes a free buffer (acquire: it waits while every buffer is being written,
// so the host memory stays the pool's), fills it with the runner's host copy and queues it
// (submit); the writer thread writes the queued buffers in queue order and frees each after its
// write. In queue order, a slot written twice ends with the later bytes. Only the engine thread
// fills buffers, so a queued buffer keeps its bytes until the engine thread takes it again: it may
// read them while they are being written. A failed write is reported by its ticket (failures())
// before its buffer is free again. The destructor cancels the writes not yet started, waits for
// the one in progress and joins the thread.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sparkglm {

class PrefixStoreWriter {
 public:
  // Called on the writer thread before each write (tests: it may hold a write pending, and false
  // fails the write as an I/O error would); null: none.
  using Gate = std::function<bool()>;
  PrefixStoreWriter(int fd, size_t buffer_bytes, int buffers, Gate gate);
  ~PrefixStoreWriter();
  PrefixStoreWriter(const PrefixStoreWriter&) = delete;
  PrefixStoreWriter& operator=(const PrefixStoreWriter&) = delete;

  int acquire();  // a free buffer, after waiting for a write when every buffer is in flight
  std::byte* data(int buffer) { return buffers_[size_t(buffer)].data(); }
  // Queues `bytes` of an acquired buffer for the file at `offset`; the buffer is free once written.
  void submit(int buffer, uint64_t offset, size_t bytes, uint64_t ticket);
  std::vector<uint64_t> failures();  // tickets of the writes that failed since the last call

 private:
  struct Write {
    int buffer = -1;
    uint64_t offset = 0;
    size_t bytes = 0;
    uint64_t ticket = 0;
  };
  void run();

  const int fd_;
  const Gate gate_;
  std::vector<std::vector<std::byte>> buffers_;
  std::mutex mutex_;
  std::condition_variable queued_, freed_;
  std::deque<Write> queue_;
  std::vector<int> free_;
  std::vector<uint64_t> failed_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once every member above is ready
};

}  // namespace sparkglm
