// sparkglm-qualify: drives the engine with defined workloads, measures, compares a candidate with
// a baseline, and writes checksum-bound receipts (QUALIFICATION.md). Each command lives in its
// module; this file only dispatches.
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "engine/core/build_info.h"
#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "gates/qualify_commands.h"
#include "gates/quality_gate.h"
#include "gates/verdict_rederivation.h"
#include "receipts/receipt_commands.h"
#include "reports/report_commands.h"

namespace {

const char* const kUsage =
    "usage: sparkglm-qualify COMMAND [ARGS]\n"
    "  run       evaluate gates G0..GN on this machine (or measure a running server with\n"
    "            --url URL) and write a bundle (run --help)\n"
    "  measure   --runner-bench FILE [--runner-bench FILE ...] [--torch-peer FILE] --title T\n"
    "            --id ID [--out DIR] [--gates DIR] [--limitation TEXT ...]: a G2 measurement\n"
    "            bundle from sparkglm-runner-bench files (and the PyTorch peer's), judging the\n"
    "            engine targets of G2.json\n"
    "   or:      --speculation-bench FILE [--speculation-bench FILE ...] --title T --id ID\n"
    "            [--out DIR] [--gates DIR] [--limitation TEXT ...]: a speculation bundle from\n"
    "            speculation_bench files, judging G2.json's speculation_targets\n"
    "  quality   [--checkpoint DIR] [--device cpu|cuda] [--kv-cache-dtype D]: the held-out loss\n"
    "            of the trained tinyGLM through the engine, judged by G2's quality_targets\n"
    "  compare   A B: side-by-side table of two bundles with the same settings\n"
    "  verify    BUNDLE [--pubkey KEY] [--keys DIR] [--gates DIR]: check every artifact, field\n"
    "            and signature, and re-derive every gate verdict and metric from the raw records\n"
    "  verify-all [--receipts DIR] [--keys DIR] [--gates DIR]: every committed bundle and the\n"
    "            results index\n"
    "  index     [--receipts DIR]: rebuild receipts/index.json\n"
    "  report    BUNDLE [--out DIR]: text card, Markdown and HTML\n"
    "  promote   --profile P --option O --value V --receipt BUNDLE\n"
    "  sign      BUNDLE --key KEY.pem [--by NAME] [--state STATE]: attest a bundle; any state\n"
    "            but measurement needs a signature by a key in receipts/keys/\n"
    "  keygen    --out KEY.pem\n"
    "  --version\n";

using Command = int (*)(const std::vector<std::string>&, std::ostream&, std::ostream&);
using Args = std::vector<std::string>;
// Every command that reads a bundle's verdicts re-derives them from its raw records (the receipts
// and reports layers sit below the gates that know how); none believes a record's own words.
constexpr sparkglm::receipts::VerdictCheck kRederive = sparkglm::gates::rederive_verdicts;

struct Entry {
  const char* name;
  Command run;
};

const Entry kCommands[] = {
    {"run", sparkglm::gates::run_command},
    {"measure", sparkglm::gates::measure_command},
    {"quality", sparkglm::gates::quality_command},
    {"promote", sparkglm::gates::promote_command},
    {"compare",
     [](const Args& a, std::ostream& o, std::ostream& e) {
       return sparkglm::reports::compare_command(a, o, e, kRederive);
     }},
    {"report",
     [](const Args& a, std::ostream& o, std::ostream& e) {
       return sparkglm::reports::report_command(a, o, e, kRederive);
     }},
    {"verify",
     [](const Args& a, std::ostream& o, std::ostream& e) {
       return sparkglm::receipts::verify_command(a, o, e, kRederive);
     }},
    {"verify-all",
     [](const Args& a, std::ostream& o, std::ostream& e) {
       return sparkglm::receipts::verify_all_command(a, o, e, kRederive);
     }},
    {"index", sparkglm::receipts::index_command},
    {"sign", [](const Args& a, std::ostream& o,
                std::ostream& e) { return sparkglm::receipts::sign_command(a, o, e, kRederive); }},
    {"keygen", sparkglm::receipts::keygen_command},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::fputs(sparkglm::version_text("sparkglm-qualify").c_str(), stdout);
    return 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const Entry& e : kCommands) {
    if (std::strcmp(argv[1], e.name)) continue;
    // As sparkglm and sparkglm-serve: a refused input exits 2, anything else that escapes a command
    // (a bug below it) exits 1 with its message rather than aborting.
    try {
      sparkglm::refuse_non_utf8_arguments(args);
      return e.run(args, std::cout, std::cerr);
    } catch (const sparkglm::Error& x) {
      std::fprintf(stderr, "sparkglm-qualify %s: %s\n", e.name, x.what());
      return 2;
    } catch (const std::exception& x) {
      std::fprintf(stderr, "sparkglm-qualify %s: internal error: %s\n", e.name, x.what());
      return 1;
    }
  }
  std::fprintf(stderr, "sparkglm-qualify: unknown command \"%s\"\n%s", argv[1], kUsage);
  return 2;
}
