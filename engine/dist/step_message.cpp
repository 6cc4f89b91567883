#include "engine/dist/step_message.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "engine/core/error.h"

namespace sparkglm::dist {

namespace {

// A new SequenceSlice or RowDraw field must be sent too: add it below, then update the size.
static_assert(sizeof(SequenceSlice) == 72, "SequenceSlice changed: encode its new field here");
static_assert(sizeof(RowDraw) == 32, "RowDraw changed: check that it is still sent whole");

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put(uint64_t(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out_.insert(out_.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <typename T>
  T get() {
    T v;
    take(&v, sizeof(T), "a field");
    return v;
  }
  template <typename T>
  std::vector<T> get_vector(const char* what) {
    const uint64_t n = get<uint64_t>();
    if (n > (in_.size() - pos_) / sizeof(T))
      throw Error(ErrorKind::kDeviceFatal, std::string("step message: ") + what + " count " +
                                               std::to_string(n) + " runs past the message's end");
    std::vector<T> v(static_cast<size_t>(n));
    take(v.data(), size_t(n) * sizeof(T), what);
    return v;
  }
  bool at_end() const { return pos_ == in_.size(); }

 private:
  void take(void* out, size_t bytes, const char* what) {
    if (bytes > in_.size() - pos_)
      throw Error(ErrorKind::kDeviceFatal, std::string("step message: truncated in ") + what);
    if (bytes > 0) std::memcpy(out, in_.data() + pos_, bytes);
    pos_ += bytes;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

void put_batch(Writer& w, const ForwardBatch& b) {
  w.put(b.tokens);
  w.put(b.positions);
  w.put(b.row_seq);
  w.put(b.logit_rows);
  w.put(uint64_t(b.seqs.size()));
  for (const SequenceSlice& s : b.seqs) {
    w.put(s.first_row);
    w.put(s.num_rows);
    w.put(s.start_position);
    w.put(s.state_slot);
    w.put(uint8_t(s.decode));
    w.put(s.block_table);
    w.put(s.restore_snapshot);
    w.put(s.save_snapshot);
    w.put(uint8_t(s.record_states));
    w.put(s.record_before_row);
    w.put(s.resume_record);
  }
}

ForwardBatch get_batch(Reader& r) {
  ForwardBatch b;
  b.tokens = r.get_vector<int32_t>("tokens");
  b.positions = r.get_vector<int32_t>("positions");
  b.row_seq = r.get_vector<int32_t>("row_seq");
  b.logit_rows = r.get_vector<int32_t>("logit_rows");
  const uint64_t n = r.get<uint64_t>();
  if (n > b.tokens.size() + 1)
    throw Error(ErrorKind::kDeviceFatal, "step message: " + std::to_string(n) + " sequences for " +
                                             std::to_string(b.tokens.size()) + " rows");
  b.seqs.resize(size_t(n));
  for (SequenceSlice& s : b.seqs) {
    s.first_row = r.get<int32_t>();
    s.num_rows = r.get<int32_t>();
    s.start_position = r.get<int32_t>();
    s.state_slot = r.get<int32_t>();
    s.decode = r.get<uint8_t>() != 0;
    s.block_table = r.get_vector<int32_t>("block_table");
    s.restore_snapshot = r.get<int32_t>();
    s.save_snapshot = r.get<int32_t>();
    s.record_states = r.get<uint8_t>() != 0;
    s.record_before_row = r.get<int32_t>();
    s.resume_record = r.get<int32_t>();
  }
  return b;
}

}  // namespace

std::vector<uint8_t> encode_step(const StepMessage& m) {
  Writer w;
  w.put(uint8_t(m.call));
  if (m.call == StepCall::kForward || m.call == StepCall::kForwardMtp ||
      m.call == StepCall::kSubmit)
    put_batch(w, m.batch);
  if (m.call == StepCall::kForwardMtp) w.put(m.hidden);
  if (m.call == StepCall::kSubmit) {
    w.put(m.sampling.picked);
    w.put(m.sampling.draws);
    w.put(m.sampling.token_from);
    w.put(m.sampling.mask_row);
    w.put(m.sampling.mask_words);
  }
  return w.take();
}

StepMessage decode_step(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  StepMessage m;
  const uint8_t call = r.get<uint8_t>();
  if (call < uint8_t(StepCall::kForward) || call > uint8_t(StepCall::kStop))
    throw Error(ErrorKind::kDeviceFatal, "step message: unknown call " + std::to_string(call));
  m.call = StepCall(call);
  if (m.call == StepCall::kForward || m.call == StepCall::kForwardMtp ||
      m.call == StepCall::kSubmit)
    m.batch = get_batch(r);
  if (m.call == StepCall::kForwardMtp) m.hidden = r.get_vector<float>("hidden");
  if (m.call == StepCall::kSubmit) {
    m.sampling.picked = r.get_vector<uint8_t>("picked");
    m.sampling.draws = r.get_vector<RowDraw>("draws");
    m.sampling.token_from = r.get_vector<int32_t>("token_from");
    m.sampling.mask_row = r.get_vector<int32_t>("mask_row");
    m.sampling.mask_words = r.get<int32_t>();
  }
  if (!r.at_end()) throw Error(ErrorKind::kDeviceFatal, "step message: bytes after its end");
  return m;
}

}  // namespace sparkglm::dist
