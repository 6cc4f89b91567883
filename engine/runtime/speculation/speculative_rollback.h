#pragma once
// How a verify step's rejected rows are rolled back (--speculative-rollback). Both are exact:
// the KDA state and conv history return to the last accepted row.
//  - records: the verify slice keeps the state after each of its k + 1 rows (k + 1 state records
//    per slot); the next slice resumes from the record of the last accepted row.
//  - recompute: the verify slice keeps only the state before its last token's row (one record
//    per slot); after a rejection the next slice resumes from it and runs the accepted rows
//    again ahead of its own (replayed rows: no logits; they rewrite their latents and indexer
//    keys with the bits they hold), keeping the state before its own rows in turn. Its cost: at
//    most k replayed rows in the step after a rejection, so a verify slice has up to 2k + 1.
#include <cstdint>
#include <string>

namespace sparkglm {

enum class SpeculativeRollback : uint8_t { kRecords, kRecompute };

const char* speculative_rollback_name(SpeculativeRollback r);
// Error(kInvalidArgument) naming `flag` for anything but records or recompute.
SpeculativeRollback speculative_rollback_from_name(
    const std::string& name, const std::string& flag = "--speculative-rollback");
// KDA state records per slot that k drafts need (0 when k is 0).
int speculative_state_records(int k, SpeculativeRollback r);
// Rows of one sequence's decode slice with k drafts: 1 without speculation, k + 1 (records),
// 2k + 1 (recompute: up to k accepted rows run again ahead of the k + 1 new ones).
int speculative_slice_rows(int k, SpeculativeRollback r);

}  // namespace sparkglm
