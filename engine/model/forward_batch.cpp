#include "engine/model/forward_batch.h"

#include <string>

#include "engine/core/error.h"

namespace sparkglm {

void ForwardBatch::add_sequence(const std::vector<int32_t>& seq_tokens, int32_t start_position,
                                int32_t state_slot, std::vector<int32_t> block_table,
                                bool want_logits, bool all_logits) {
  SequenceSlice s;
  s.first_row = num_rows();
  s.num_rows = int32_t(seq_tokens.size());
  s.start_position = start_position;
  s.state_slot = state_slot;
  s.decode = seq_tokens.size() == 1 && !all_logits;
  s.block_table = std::move(block_table);
  const int32_t seq = int32_t(seqs.size());
  for (int32_t i = 0; i < s.num_rows; ++i) {
    tokens.push_back(seq_tokens[size_t(i)]);
    positions.push_back(start_position + i);
    row_seq.push_back(seq);
    if (all_logits || (want_logits && i == s.num_rows - 1)) logit_rows.push_back(s.first_row + i);
  }
  seqs.push_back(std::move(s));
}

void ForwardBatch::validate(const ModelConfig& config, int block_size, int num_blocks,
                            int num_slots, int num_snapshots, int state_records) const {
  auto fail = [](const std::string& m) {
    throw Error(ErrorKind::kInvalidArgument, "forward batch: " + m);
  };
  const int32_t t = num_rows();
  if (positions.size() != size_t(t) || row_seq.size() != size_t(t))
    fail("tokens, positions and row_seq must have one entry per row");
  int32_t expected_first = 0;
  std::vector<bool> slot_used(size_t(std::max(num_slots, 0)), false);
  for (size_t si = 0; si < seqs.size(); ++si) {
    const SequenceSlice& s = seqs[si];
    const std::string who = "sequence " + std::to_string(si);
    if (s.first_row != expected_first || s.num_rows <= 0)
      fail(who + ": rows must be contiguous, non-empty and in sequence order");
    expected_first += s.num_rows;
    const bool keeps_one = s.record_before_row >= 0;
    if (s.decode && s.num_rows != 1 && !s.record_states && !keeps_one)
      fail(who + ": a decode slice has exactly one row unless it records its states (verify)");
    if (s.record_before_row < -1 || s.record_before_row >= s.num_rows)
      fail(who + ": records the state before row " + std::to_string(s.record_before_row) + " of " +
           std::to_string(s.num_rows));
    if (keeps_one && (s.record_states || !s.decode))
      fail(who + ": the state before one row is kept in decode slices that record nothing else");
    if (keeps_one && state_records < 1)
      fail(who + ": records the state before a row; the runner keeps no state records");
    if (s.record_states && s.num_rows > state_records)
      fail(who + ": records the KDA state of " + std::to_string(s.num_rows) +
           " rows; the runner keeps " + std::to_string(state_records) + " per slot");
    if (s.resume_record < -1 || s.resume_record >= state_records)
      fail(who + ": state record " + std::to_string(s.resume_record) + " outside [0, " +
           std::to_string(state_records) + ")");
    if (s.resume_record >= 0 && (s.start_position == 0 || s.restore_snapshot >= 0))
      fail(who + ": a rewound state resumes a running sequence, without a snapshot restore");
    if (s.state_slot < 0 || s.state_slot >= num_slots)
      fail(who + ": state slot " + std::to_string(s.state_slot) + " outside [0, " +
           std::to_string(num_slots) + ")");
    if (slot_used[size_t(s.state_slot)]) fail(who + ": state slot shared by two sequences");
    slot_used[size_t(s.state_slot)] = true;
    if (s.start_position < 0) fail(who + ": negative start position");
    for (int32_t snap : {s.restore_snapshot, s.save_snapshot})
      if (snap < -1 || snap >= num_snapshots)
        fail(who + ": state snapshot " + std::to_string(snap) + " outside [0, " +
             std::to_string(num_snapshots) + ")");
    if (s.restore_snapshot >= 0 && s.start_position == 0)
      fail(who + ": a restored state must resume at a position above 0");
    const int64_t end = int64_t(s.start_position) + s.num_rows;
    if (end > config.max_position_embeddings)
      fail(who + ": positions beyond max_position_embeddings");
    if (int64_t(s.block_table.size()) * block_size < end)
      fail(who + ": block table covers " +
           std::to_string(s.block_table.size() * size_t(block_size)) + " positions, needs " +
           std::to_string(end));
    for (int32_t b : s.block_table)
      if (b < 0 || b >= num_blocks) fail(who + ": block id " + std::to_string(b) + " out of range");
    for (int32_t i = 0; i < s.num_rows; ++i) {
      const size_t r = size_t(s.first_row + i);
      if (positions[r] != s.start_position + i || row_seq[r] != int32_t(si))
        fail("row " + std::to_string(r) + ": position or sequence id does not match its slice");
      if (tokens[r] < 0 || tokens[r] >= config.vocab_size)
        fail("row " + std::to_string(r) + ": token id " + std::to_string(tokens[r]) +
             " outside the vocabulary [0, " + std::to_string(config.vocab_size) + ")");
    }
  }
  if (expected_first != t) fail("rows not covered by a sequence slice");
  for (int32_t r : logit_rows)
    if (r < 0 || r >= t) fail("logit row " + std::to_string(r) + " out of range");
}

}  // namespace sparkglm
