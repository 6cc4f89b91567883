#pragma once
// The receipt commands of sparkglm-qualify. Each takes the arguments after its name, writes what
// it did to `out` and each problem to `err`, and returns the exit status: 0 done, 1 the bundle or
// the receipts folder does not verify (or signing was refused), 2 bad arguments or an I/O error.
#include <ostream>
#include <string>
#include <vector>

#include "receipts/bundle_verifier.h"

namespace sparkglm::receipts {

// `verdicts` re-derives gate verdicts and metrics (gates/verdict_rederivation.h); the program
// always hands it in, so that no command judges a verdict by the record's own words.
//
// verify BUNDLE [--pubkey KEY] [--keys DIR] [--gates DIR]
//   KEY: a PEM public key file, KEY.pub, or base64 text; DIR defaults: receipts/keys, gates
int verify_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                   VerdictCheck verdicts);
// verify-all [--receipts DIR] [--keys DIR] [--gates DIR]
//   (defaults: receipts/ in the working directory, its keys/, gates/)
int verify_all_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                       VerdictCheck verdicts);
// index [--receipts DIR]
int index_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// sign BUNDLE --key KEY.pem [--by NAME] [--state STATE] [--keys DIR] [--gates DIR]
//   (NAME defaults to $USER; STATE, e.g. accepted, replaces the record's state)
int sign_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 VerdictCheck verdicts);
// keygen --out KEY.pem   (writes KEY.pem, mode 0600, and KEY.pub, the base64 public key)
int keygen_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace sparkglm::receipts
