#pragma once
// The `report` and `compare` commands of sparkglm-qualify, and the renderings the runner stores.
//   report BUNDLE [--out DIR] [--format card|md|html]
//     prints the card (or the chosen format); with --out also writes card.txt, report.md and
//     report.html into DIR, which must lie outside the bundle (a file added to a bundle would
//     make it fail verification).
//   compare A B [--out FILE.md] [--min-effect PCT]
//     prints the side-by-side Markdown table of A and B (and writes it to FILE.md); refuses,
//     naming each differing field, when their settings differ.
// Both verify every bundle first and refuse one that does not verify (a report presents what a
// bundle claims as fact): the structure, hashes, trusted signature and consistency always, and
// the gate verdicts re-derived when `verdicts` is given (the program always gives it). --keys DIR
// and --gates DIR choose the trusted keys and gate definitions (receipts/keys, gates).
// `args` excludes the command word. Exit codes: 0 done, 1 a bundle does not verify or compare
// refused (settings differ), 2 bad arguments or an unreadable bundle (the message names what is
// wrong).
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "receipts/bundle_verifier.h"

namespace sparkglm::reports {

struct RenderedReport {
  std::string card, markdown, html;
};

// Every rendering of the bundle at `bundle_dir`; throws Error when it cannot be read.
RenderedReport render_all(const std::filesystem::path& bundle_dir);

int report_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                   receipts::VerdictCheck verdicts = nullptr);
int compare_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    receipts::VerdictCheck verdicts = nullptr);

}  // namespace sparkglm::reports
