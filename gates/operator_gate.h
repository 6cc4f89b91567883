#pragma once
// G1 from an operator table (schema "sparkglm.operators/1"): the CUDA backend's runner compares
// every operator with the CPU reference at production shapes and writes one row per (operator,
// shape) with its error, tolerance, poison, finiteness, repeatability, batch-invariance, median
// time and floor. This gate only judges the table; the runner is the CUDA backend's
// (bench/cuda/g1_operators). Without a table and without a GPU, G1 is not-run.
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "gates/gate_definition.h"
#include "receipts/bundle_writer.h"

namespace sparkglm::gates {

// `table`: an operators.json made elsewhere (a GPU machine); else, with a GPU and `runner`
// present, the runner is run into the bundle. The table becomes the bundle's operators.json.
GateResult evaluate_operator_gate(const GateDefinition& definition,
                                  const std::filesystem::path& table,
                                  const std::filesystem::path& runner, bool gpu,
                                  receipts::BundleWriter& bundle, std::ostream& err);

// What the table says about speed, one line per operator that misses its target (decode and other
// memory-bound rows: 70 % of the HBM floor; compute-bound rows: 60 % of measured BF16 peak) or is
// slower than a peer timed on the same shape, with by how much and the row's own note (why).
std::vector<std::string> operator_table_limitations(const nlohmann::json& table);

// The criteria of `definition` over a parsed table (for tests).
GateResult judge_operator_table(const GateDefinition& definition, const nlohmann::json& table);

}  // namespace sparkglm::gates
