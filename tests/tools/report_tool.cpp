// Drives the reports module for tests/python/test_report_html.py until sparkglm-qualify carries the
// same commands:
//   report_tool report BUNDLE [--out DIR] [--format card|md|html]
//   report_tool compare A B [--out FILE.md]
// Exit codes are those of reports::report_command and reports::compare_command.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "reports/report_commands.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || (args[0] != "report" && args[0] != "compare")) {
    std::fprintf(stderr,
                 "usage: report_tool report BUNDLE [--out DIR] [--format card|md|html]\n"
                 "       report_tool compare A B [--out FILE.md]\n");
    return 2;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  return args[0] == "report" ? sparkglm::reports::report_command(rest, std::cout, std::cerr)
                             : sparkglm::reports::compare_command(rest, std::cout, std::cerr);
}
