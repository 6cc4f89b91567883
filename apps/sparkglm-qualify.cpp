// sparkglm-qualify: drives the engine with defined workloads, measures, compares a candidate with
// a baseline, and writes checksum-bound receipts (QUALIFICATION.md). Each command lives in its
// module; this file only dispatches.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "engine/core/build_info.h"
#include "gates/qualify_commands.h"
#include "receipts/receipt_commands.h"
#include "reports/report_commands.h"

namespace {

const char* const kUsage =
    "usage: sparkglm-qualify COMMAND [ARGS]\n"
    "  run       evaluate gates G0..GN on this machine and write a bundle (run --help)\n"
    "  measure   --runner-bench FILE [--runner-bench FILE ...] [--torch-peer FILE] --title T\n"
    "            --id ID [--out DIR] [--gates DIR] [--limitation TEXT ...]: a G2 measurement\n"
    "            bundle from sparkglm-runner-bench files (and the PyTorch peer's), judging the\n"
    "            engine targets of G2.json\n"
    "  compare   A B: side-by-side table of two bundles with the same settings\n"
    "  verify    BUNDLE [--pubkey KEY]: check every artifact, field and signature\n"
    "  verify-all [--receipts DIR]: every committed bundle and the results index\n"
    "  index     [--receipts DIR]: rebuild receipts/index.json\n"
    "  report    BUNDLE [--out DIR]: text card, Markdown and HTML\n"
    "  promote   --profile P --option O --value V --receipt BUNDLE\n"
    "  sign      BUNDLE --key KEY.pem [--by NAME]\n"
    "  keygen    --out KEY.pem\n"
    "  --version\n";

using Command = int (*)(const std::vector<std::string>&, std::ostream&, std::ostream&);

struct Entry {
  const char* name;
  Command run;
};

const Entry kCommands[] = {
    {"run", sparkglm::gates::run_command},
    {"measure", sparkglm::gates::measure_command},
    {"promote", sparkglm::gates::promote_command},
    {"compare", sparkglm::reports::compare_command},
    {"report", sparkglm::reports::report_command},
    {"verify", sparkglm::receipts::verify_command},
    {"verify-all", sparkglm::receipts::verify_all_command},
    {"index", sparkglm::receipts::index_command},
    {"sign", sparkglm::receipts::sign_command},
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
  for (const Entry& e : kCommands)
    if (!std::strcmp(argv[1], e.name)) return e.run(args, std::cout, std::cerr);
  std::fprintf(stderr, "sparkglm-qualify: unknown command \"%s\"\n%s", argv[1], kUsage);
  return 2;
}
